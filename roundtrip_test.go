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
	e := openEnv(t, "postgres")
	lib := perf.NewLibrary(e)
	const owner, n = "rt", 40
	// Warm up: the first use of a query on a connection prepares it.
	for i := range 3 {
		if _, _, err := lib.Submit(ctx, owner, fmt.Sprintf("warm-%d", i)); err != nil {
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
		before := e.RoundTrips()
		for i := range n {
			_, created, err := lib.Submit(ctx, owner, tt.key(i))
			if err != nil {
				t.Fatal(err)
			}
			if created != tt.wantCreated {
				t.Fatalf("%s %d: created = %v, want %v", tt.name, i, created, tt.wantCreated)
			}
		}
		// database/sql may ping a connection that was idle for over a
		// second before reusing it: allow one.
		if got := e.RoundTrips() - before; got > n+1 {
			t.Errorf("%s: %d round trips for %d submits, want %d", tt.name, got, n, n)
		}
	}
}
