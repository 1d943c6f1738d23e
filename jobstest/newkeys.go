package jobstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// testAfterNewKeys: a store may serve a run of new keys with a cheaper
// statement than a replay needs (the SQL stores insert first after a
// streak of new keys). Whatever follows such a run gets the same answers
// as ever: a replay its job, unchanged; another intent ErrKeyConflict,
// writing nothing; a burst of one key one job; and a replay after that
// (served by the other statement) the same job again.
func testAfterNewKeys(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	var streak []jobs.Job
	newKeys := func(t *testing.T) {
		t.Helper()
		for range 8 {
			j, created, err := e.m.Submit(e.ctx, req("owner-1", "new-"+randomHex(6)))
			if err != nil || !created {
				t.Fatalf("Submit of a new key: created=%v, %v", created, err)
			}
			streak = append(streak, j)
		}
	}
	for round := range 3 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			e := e.with(t)
			newKeys(t)
			first := streak[0]
			j, created, err := e.m.Submit(e.ctx, req(first.Owner, first.Key))
			if err != nil || created {
				t.Fatalf("replay after new keys: created=%v, %v", created, err)
			}
			if diff := cmp.Diff(first, j); diff != "" {
				t.Errorf("replay after new keys returned another job (-want +got):\n%s", diff)
			}

			newKeys(t)
			other := req(first.Owner, first.Key)
			other.Params = json.RawMessage(`{"amount":1300,"currency":"eur"}`)
			_, _, err = e.m.Submit(e.ctx, other)
			var kc *jobs.KeyConflictError
			if !errors.As(err, &kc) || !errors.Is(err, jobs.ErrKeyConflict) || kc.JobID != first.ID {
				t.Fatalf("another intent after new keys: %v, want ErrKeyConflict naming %s", err, first.ID)
			}
			if diff := cmp.Diff(first, e.job(first.ID)); diff != "" {
				t.Errorf("the existing job changed (-before +after):\n%s", diff)
			}

			newKeys(t)
			key := "burst-" + randomHex(6)
			id := e.submitAtOnce(32, req("owner-1", key))
			if j, created, err := e.m.Submit(e.ctx, req("owner-1", key)); err != nil || created || j.ID != id {
				t.Errorf("replay after the burst = %s, created=%v, %v; want %s", j.ID, created, err, id)
			}
		})
	}
	if got, want := e.countJobs(), len(streak)+3; got != want {
		t.Errorf("store holds %d jobs, want %d", got, want)
	}
	e.checkInvariants()
}
