package jobstest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// testPurge proves PurgeJobs: only terminal jobs closed before the cut-off
// and whose attempts are all terminal go, a dry run deletes nothing, and a
// purged key is free for a new job.
func testPurge(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	closedOld := e.newJob()
	a := e.start(closedOld.ID, "")
	if _, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	// A cancelled job whose attempt is starting, running or unknown is
	// kept, however old: that attempt may still act, and a purge would free
	// its key for a second job of the same intent.
	var cancelledOld []jobs.Job
	var inFlight []jobs.Attempt
	for _, state := range []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown} {
		j, a := e.cancelledWith("in-flight-"+string(state), state)
		cancelledOld, inFlight = append(cancelledOld, j), append(inFlight, a)
	}
	openOld := e.newJob()
	e.clock.Advance(3 * time.Hour)
	closedRecent := e.newJob()
	if _, err := e.m.FailJob(e.ctx, closedRecent.ID, "gave up"); err != nil {
		t.Fatal(err)
	}

	dry, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour, DryRun: true})
	if err != nil || dry.Jobs != 1 || dry.Attempts != 1 {
		t.Fatalf("dry run = %+v, %v; want 1 job and 1 attempt", dry, err)
	}
	if got := e.countJobs(); got != 6 {
		t.Fatalf("a dry run deleted: %d jobs left, want 6", got)
	}
	res, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour})
	if err != nil || res.Jobs != 1 || res.Attempts != 1 {
		t.Fatalf("Purge = %+v, %v; want 1 job and its attempt", res, err)
	}
	if _, err := e.m.Get(e.ctx, closedOld.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the old closed job is still there: %v", err)
	}
	for _, keep := range append(cancelledOld, openOld, closedRecent) {
		if _, err := e.m.Get(e.ctx, keep.ID); err != nil {
			t.Errorf("job %s (%s) was purged: %v", keep.ID, keep.Key, err)
		}
	}
	for _, a := range inFlight {
		if got := e.attempt(a.ID); got.State != a.State {
			t.Errorf("the %s attempt of a cancelled job is %s", a.State, got.State)
		}
	}
	// Even with no retention at all.
	if res, err := e.m.Purge(e.ctx, jobs.PurgeOptions{OlderThan: e.clock.Now().Add(time.Hour)}); err != nil || res.Jobs != 1 {
		t.Fatalf("Purge of everything closed = %+v, %v; want only the recently failed job", res, err)
	}
	for _, keep := range cancelledOld {
		if _, err := e.m.Get(e.ctx, keep.ID); err != nil {
			t.Errorf("job %s with an attempt in flight was purged: %v", keep.ID, err)
		}
	}
	again, created, err := e.m.Submit(e.ctx, req(closedOld.Owner, closedOld.Key))
	if err != nil || !created || again.ID == closedOld.ID {
		t.Fatalf("resubmitting a purged key = %s, created=%v, %v; want a new job", again.ID, created, err)
	}
	e.checkInvariants()
}

// testPurgeRetired: purging a job whose key was reused leaves its
// replacement and the key.
func testPurgeRetired(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	old := e.jobIn("k", jobs.JobFailed)
	n, _, err := e.m.Submit(e.ctx, reuseReq("k", jobs.KeyReuseAfterFailure))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	if res, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour}); err != nil || res.Jobs != 1 {
		t.Fatalf("Purge = %+v, %v; want the failed job purged", res, err)
	}
	if _, err := e.m.Get(e.ctx, old.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Get(retired job) after purge = %v; want ErrNotFound", err)
	}
	if got, err := e.m.GetByKey(e.ctx, "owner-1", "k"); err != nil || got.ID != n.ID {
		t.Errorf("GetByKey after purge = %s, %v; want %s", got.ID, err, n.ID)
	}
	if _, err := e.m.Replaced(e.ctx, n.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Replaced after purge = %v; want ErrNotFound", err)
	}
	e.checkInvariants()
}
