package jobstest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

func testJobTransitions(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	jobIn := func(state string) jobs.Job {
		j := e.newJob()
		switch state {
		case "pending":
		case "running, attempt open":
			e.running(j.ID)
		case "running, attempts done":
			a := e.start(j.ID, "")
			e.m.Fail(e.ctx, a.ID, "declined")
		case "succeeded":
			a := e.start(j.ID, "")
			e.m.Complete(e.ctx, a.ID, json.RawMessage(`1`))
		case "failed":
			e.m.FailJob(e.ctx, j.ID, "gave up")
		case "cancelled":
			e.m.CancelJob(e.ctx, j.ID, "stop")
		}
		return e.job(j.ID)
	}
	for _, tc := range []struct {
		from    string
		verb    string
		want    error
		toState jobs.JobState
	}{
		{"pending", "FailJob", nil, jobs.JobFailed},
		{"pending", "CancelJob", nil, jobs.JobCancelled},
		{"running, attempt open", "FailJob", jobs.ErrAttemptInFlight, ""},
		{"running, attempt open", "CancelJob", nil, jobs.JobCancelled},
		{"running, attempts done", "FailJob", nil, jobs.JobFailed},
		{"running, attempts done", "CancelJob", nil, jobs.JobCancelled},
		{"succeeded", "FailJob", jobs.ErrJobClosed, ""},
		{"succeeded", "CancelJob", jobs.ErrJobClosed, ""},
		{"failed", "FailJob", nil, ""}, // a repeat
		{"failed", "CancelJob", jobs.ErrJobClosed, ""},
		{"cancelled", "CancelJob", nil, ""}, // a repeat
		{"cancelled", "FailJob", jobs.ErrJobClosed, ""},
	} {
		t.Run(tc.from+"/"+tc.verb, func(t *testing.T) {
			e := e.with(t)
			j := jobIn(tc.from)
			var got jobs.Job
			var err error
			if tc.verb == "FailJob" {
				got, err = e.m.FailJob(e.ctx, j.ID, "reason")
			} else {
				got, err = e.m.CancelJob(e.ctx, j.ID, "reason")
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("%s from %s = %v, want %v", tc.verb, tc.from, err, tc.want)
			}
			after := e.job(j.ID)
			if tc.toState == "" {
				if diff := cmp.Diff(j, after); diff != "" {
					t.Errorf("%s from %s changed the job (-before +after):\n%s", tc.verb, tc.from, diff)
				}
				return
			}
			if after.State != tc.toState || after.Version != j.Version+1 || after.Reason != "reason" || after.ClosedAt.IsZero() {
				t.Errorf("job = %s v%d %q closed %v; want %s v%d", after.State, after.Version, after.Reason, after.ClosedAt, tc.toState, j.Version+1)
			}
			if diff := cmp.Diff(after, got); diff != "" {
				t.Errorf("returned job differs from stored (-stored +returned):\n%s", diff)
			}
		})
	}

	t.Run("a cancelled job drops a late result", func(t *testing.T) {
		e := e.with(t)
		j := e.newJob()
		a := e.running(j.ID)
		cancelled, err := e.m.CancelJob(e.ctx, j.ID, "user gave up")
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"late":true}`))
		if !errors.Is(err, jobs.ErrJobClosed) {
			t.Fatalf("Complete after CancelJob = %v, want ErrJobClosed", err)
		}
		if diff := cmp.Diff(cancelled, e.job(j.ID)); diff != "" {
			t.Errorf("late result changed the cancelled job:\n%s", diff)
		}
		if got := e.attempt(a.ID); got.State != jobs.AttemptCancelled {
			t.Errorf("attempt = %s, want cancelled", got.State)
		}
	})
	e.checkInvariants()
}
