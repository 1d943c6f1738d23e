package jobs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// Several stores on one SQLite file stand for several processes: many
// goroutines in each write at once, and "database is locked" never reaches
// a caller.
func TestSQLiteManyWriters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	const stores, goroutines, keys = 4, 16, 40
	managers := make([]*jobs.Manager, stores)
	for i := range managers {
		managers[i] = jobstest.NewManager(t, testdb.NewSQLiteAt(t, path), jobs.Options{Logger: discard, Hedging: true})
	}
	ctx := t.Context()
	var mu sync.Mutex
	var failures []error
	var wg sync.WaitGroup
	for s := range stores {
		for g := range goroutines {
			wg.Go(func() {
				m := managers[s]
				for k := range keys {
					j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: fmt.Sprintf("key-%d", (k+g)%keys),
						Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
					if err == nil {
						var a jobs.Attempt
						if a, err = m.StartAttempt(ctx, j.ID, ""); err == nil {
							_, err = m.Complete(ctx, a.ID, json.RawMessage(fmt.Sprintf(`{"by":"%d/%d"}`, s, g)))
						}
					}
					if err != nil && !errors.Is(err, jobs.ErrAttemptInFlight) && !errors.Is(err, jobs.ErrJobClosed) && !errors.Is(err, jobs.ErrLostRace) {
						mu.Lock()
						failures = append(failures, err)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range failures[:min(len(failures), 5)] {
		t.Errorf("unexpected error: %v", err)
	}
	if len(failures) > 0 {
		t.Fatalf("%d unexpected errors", len(failures))
	}
	store := testdb.NewSQLiteAt(t, path)
	snap, err := invariant.TakeSnapshot(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Jobs) != keys {
		t.Errorf("%d jobs, want %d", len(snap.Jobs), keys)
	}
	for _, j := range snap.Jobs {
		if j.State != jobs.JobSucceeded {
			t.Errorf("job %s is %s, want succeeded", j.ID, j.State)
		}
	}
	for _, v := range snap.Check() {
		t.Errorf("invariant violated: %s", v)
	}
}

// ObserveWriteWait reports one wait per write of a SQLite store (it is a
// SQLiteOption: the PostgreSQL store does not take it). A replay is found by a read, and does not
// queue to write, except right after a streak of new keys: then the
// insert finds it (one write that changes nothing), and the next replay is
// read again.
func TestObserveWriteWaitOncePerWrite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		open func(t testing.TB, opts ...jobs.SQLiteOption) jobs.SQLStore
		want int
	}{
		{"sqlite", func(t testing.TB, opts ...jobs.SQLiteOption) jobs.SQLStore { return testdb.NewSQLite(t, opts...) }, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var waits []time.Duration
			store := tc.open(t, jobs.ObserveWriteWait(func(d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				waits = append(waits, d)
			}))
			m := jobstest.NewManager(t, store, jobs.Options{Logger: discard})
			ctx := t.Context()
			req := jobs.SubmitRequest{Owner: "o", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)}
			var j jobs.Job
			for i := range 5 { // 5 writes
				req.Key = fmt.Sprint("k", i)
				var err error
				if j, _, err = m.Submit(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 { // 1 write (after the streak of new keys), then 2 reads
				if _, created, err := m.Submit(ctx, req); err != nil || created {
					t.Fatalf("replay: created %v, %v", created, err)
				}
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(waits) != tc.want {
				t.Errorf("%d waits observed for 5 Submits, 3 replays, StartAttempt and Complete, want %d", len(waits), tc.want)
			}
			for _, d := range waits {
				if d < 0 {
					t.Errorf("negative wait %v", d)
				}
			}
		})
	}
}
