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
	cancelledOld := e.newJob()
	inFlight := e.running(cancelledOld.ID) // an attempt still open keeps its job
	if _, err := e.m.CancelJob(e.ctx, cancelledOld.ID, "stop"); err != nil {
		t.Fatal(err)
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
	if got := e.countJobs(); got != 4 {
		t.Fatalf("a dry run deleted: %d jobs left, want 4", got)
	}
	res, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour})
	if err != nil || res.Jobs != 1 || res.Attempts != 1 {
		t.Fatalf("Purge = %+v, %v; want 1 job and its attempt", res, err)
	}
	if _, err := e.m.Get(e.ctx, closedOld.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the old closed job is still there: %v", err)
	}
	for _, keep := range []jobs.Job{cancelledOld, openOld, closedRecent} {
		if _, err := e.m.Get(e.ctx, keep.ID); err != nil {
			t.Errorf("job %s (%s) was purged: %v", keep.ID, keep.Key, err)
		}
	}
	if got := e.attempt(inFlight.ID); got.State != jobs.AttemptRunning {
		t.Errorf("the open attempt of a cancelled job is %s", got.State)
	}
	again, created, err := e.m.Submit(e.ctx, req(closedOld.Owner, closedOld.Key))
	if err != nil || !created || again.ID == closedOld.ID {
		t.Fatalf("resubmitting a purged key = %s, created=%v, %v; want a new job", again.ID, created, err)
	}
	e.checkInvariants()
}
