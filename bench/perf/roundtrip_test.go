package perf_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs/bench/perf"
)

// TestPostgresSubmitRoundTrips counts the requests Submit sends to
// PostgreSQL: one for a new key and one for a replay, once the connection
// has prepared its statements, but for the call at which the keys turn
// from new to taken or back, which takes two (the statement chosen for the
// streak misses: see keyStreak in the root package).
func TestPostgresSubmitRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lib := openLibrary(t, perf.Postgres, "")
	const owner, n = "rt", 40
	// Warm up: the first use of a query on a connection prepares it. New
	// keys, then replays, then new keys again use every statement Submit
	// may send.
	for i := range 18 {
		key := fmt.Sprintf("warm-%d", i)
		if i >= 6 && i < 12 {
			key = "warm-0"
		}
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
		// One more for the turn of the streak; and database/sql may ping
		// a connection that was idle for over a second before reusing it:
		// allow one more.
		if got := lib.RoundTrips() - before; got > n+2 {
			t.Errorf("%s: %d round trips for %d submits, want %d and one for the streak's turn", tt.name, got, n, n)
		}
	}
}
