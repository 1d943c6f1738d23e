package jobstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// A store may choose its statements by the keys it met of late: the SQL
// stores insert first after a streak of new keys and look the key up first
// after a streak of taken ones (see keyStreak in the jobs package). These
// cases run such streaks, then what could be answered wrongly after them.

// testAfterNewKeys: a store may serve a run of new keys with a cheaper
// statement than a replay needs. Whatever follows such a run gets the same answers
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
			e.otherIntentConflicts(first)

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

// testAfterReplays: after a run of replays a store may look a key up
// before it writes (the SQL stores do). A new key that follows is still
// created, another intent under a taken key is still ErrKeyConflict, and
// a burst of one new key still makes one job.
func testAfterReplays(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	first := e.submit(req("owner-1", "replayed"))
	replays := func(t *testing.T) {
		t.Helper()
		for range 8 {
			j, created, err := e.m.Submit(e.ctx, req("owner-1", "replayed"))
			if err != nil || created || j.ID != first.ID {
				t.Fatalf("replay = %s, created=%v, %v; want %s", j.ID, created, err, first.ID)
			}
		}
	}
	for round := range 3 {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) {
			e := e.with(t)
			replays(t)
			key := "fresh-" + randomHex(6)
			j, created, err := e.m.Submit(e.ctx, req("owner-1", key))
			if err != nil || !created {
				t.Fatalf("new key after replays: created=%v, %v", created, err)
			}
			if got := e.job(j.ID); got.Key != key {
				t.Errorf("the new job holds key %q, want %q", got.Key, key)
			}

			replays(t)
			e.otherIntentConflicts(first)

			replays(t)
			e.submitAtOnce(32, req("owner-1", "burst-"+randomHex(6)))
		})
	}
	if got, want := e.countJobs(), 1+3*2; got != want {
		t.Errorf("store holds %d jobs, want %d", got, want)
	}
	e.checkInvariants()
}

// otherIntentConflicts submits another intent under the key of job and
// checks that it is ErrKeyConflict naming job, which stays as it was.
func (e *env) otherIntentConflicts(job jobs.Job) {
	e.t.Helper()
	other := req(job.Owner, job.Key)
	other.Params = json.RawMessage(`{"amount":1300,"currency":"eur"}`)
	_, _, err := e.m.Submit(e.ctx, other)
	var kc *jobs.KeyConflictError
	if !errors.As(err, &kc) || !errors.Is(err, jobs.ErrKeyConflict) || kc.JobID != job.ID {
		e.t.Fatalf("another intent under the key of %s: %v, want ErrKeyConflict naming it", job.ID, err)
	}
	if diff := cmp.Diff(job, e.job(job.ID)); diff != "" {
		e.t.Errorf("the job holding the key changed (-before +after):\n%s", diff)
	}
}
