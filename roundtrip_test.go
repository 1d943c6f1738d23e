package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs/internal/perf"
)

// TestPostgresSubmitRoundTrips counts the requests Submit sends to
// PostgreSQL: one for a new key and one for a replay, once the connection
// has prepared its statements.
func TestPostgresSubmitRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lib := openLibrary(t, perf.Postgres, "")
	const owner, n = "rt", 40
	// Warm up: the first use of a query on a connection prepares it.
	for i := range 3 {
		key := fmt.Sprintf("warm-%d", i)
		if _, _, err := lib.Submit(ctx, owner, key, perf.ParamsFor(key)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		key         func(i int) string
		wantCreated bool
	}{
		{"new key", func(i int) string { return fmt.Sprintf("new-%d", i) }, true},
		{"replay", func(i int) string { return fmt.Sprintf("new-%d", i%5) }, false},
	}
	for _, tt := range tests {
		before := lib.RoundTrips()
		for i := range n {
			key := tt.key(i)
			_, created, err := lib.Submit(ctx, owner, key, perf.ParamsFor(key))
			if err != nil {
				t.Fatal(err)
			}
			if created != tt.wantCreated {
				t.Fatalf("%s %d: created = %v, want %v", tt.name, i, created, tt.wantCreated)
			}
		}
		// database/sql may ping a connection that was idle for over a
		// second before reusing it: allow one.
		if got := lib.RoundTrips() - before; got > n+1 {
			t.Errorf("%s: %d round trips for %d submits, want %d", tt.name, got, n, n)
		}
	}
}
