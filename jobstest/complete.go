package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// The cases of the compare-and-swap that finishes a job: the finishing
// order decides, exactly one of racing Completes (or cancels) wins, the
// rows returned agree with the rows stored, and repeats are harmless.

func testFinishingOrder(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name         string
		secondFirst  bool
		winnerResult string
	}{
		{"reverse: B starts second, finishes first, wins", true, `{"by":"B"}`},
		{"plain: A starts first, finishes first, wins", false, `{"by":"A"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			a := e.running(j.ID)
			e.clock.Advance(10 * time.Second)
			b := e.start(j.ID, "fallback", jobs.Hedge())
			if _, err := e.m.MarkRunning(e.ctx, b.ID, "ref-b"); err != nil {
				t.Fatal(err)
			}
			winner, loser := a, b
			winRes, loseRes := json.RawMessage(`{"by":"A"}`), json.RawMessage(`{"by":"B"}`)
			if tc.secondFirst {
				winner, loser = b, a
				winRes, loseRes = loseRes, winRes
			}
			e.clock.Advance(5 * time.Second)
			done, err := e.m.Complete(e.ctx, winner.ID, winRes)
			if err != nil {
				t.Fatalf("first Complete: %v", err)
			}
			if done.State != jobs.JobSucceeded || done.CompletedBy != winner.ID || done.Version != j.Version+1 ||
				string(done.Result) != tc.winnerResult {
				t.Fatalf("job after the first Complete = %+v; want succeeded by %s at version %d with %s", done, winner.ID, j.Version+1, tc.winnerResult)
			}
			e.clock.Advance(25 * time.Second)
			_, err = e.m.Complete(e.ctx, loser.ID, loseRes)
			var lost *jobs.LostRaceError
			if !errors.Is(err, jobs.ErrLostRace) || !errors.As(err, &lost) || lost.WinnerID != winner.ID || lost.AttemptID != loser.ID {
				t.Fatalf("late Complete = %v, want ErrLostRace naming winner %s", err, winner.ID)
			}
			final := e.job(j.ID)
			if diff := cmp.Diff(done, final); diff != "" {
				t.Errorf("the late result changed the job (-after first +after late):\n%s", diff)
			}
			if got := e.attempt(loser.ID); got.State != jobs.AttemptLost || got.FinishedAt.IsZero() {
				t.Errorf("loser attempt = %s (finished %v), want lost", got.State, got.FinishedAt)
			}
			if got := e.attempt(winner.ID); got.State != jobs.AttemptSucceeded {
				t.Errorf("winner attempt = %s, want succeeded", got.State)
			}
		})
	}
	e.checkInvariants()
}

func testCompleteRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	const n = 32
	atts := make([]jobs.Attempt, n)
	for i := range n {
		atts[i] = e.running(j.ID, jobs.Hedge())
	}
	errs := make([]error, n)
	results := make([]jobs.Job, n)
	release(n, func(i int) {
		results[i], errs[i] = e.m.Complete(e.ctx, atts[i].ID, json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, i)))
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("attempts %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no attempt won: %v", errs[0])
	}
	for i, err := range errs {
		if i == winner {
			continue
		}
		var lost *jobs.LostRaceError
		if !errors.As(err, &lost) || lost.WinnerID != atts[winner].ID {
			t.Errorf("Complete %d = %v, want ErrLostRace naming %s", i, err, atts[winner].ID)
		}
	}
	final := e.job(j.ID)
	if final.CompletedBy != atts[winner].ID || final.Version != j.Version+1 || string(final.Result) != fmt.Sprintf(`{"attempt":%d}`, winner) {
		t.Errorf("job = %+v; want completed by %s, version %d, its result", final, atts[winner].ID, j.Version+1)
	}
	lostCount := 0
	for _, a := range e.attempts(j.ID) {
		if a.State == jobs.AttemptLost {
			lostCount++
		}
	}
	if lostCount != n-1 {
		t.Errorf("%d attempts lost, want %d", lostCount, n-1)
	}
	e.checkInvariants()
}

// testCancelRacesComplete releases, on many jobs at once, the four calls
// that can decide one: Complete of each of two hedged attempts, Cancel of
// the first, and CancelJob. Whatever the order the store serializes them
// in, exactly one of them decides the job, the answers agree with the rows,
// and no result lands on a job or attempt that was cancelled.
func testCancelRacesComplete(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	const n = 24
	type race struct {
		job                  jobs.Job
		a, b                 jobs.Attempt
		completeA, completeB error
		cancelA, cancelJob   error
	}
	races := make([]race, n)
	for i := range races {
		j := e.newJob()
		races[i] = race{job: j, a: e.running(j.ID, jobs.Hedge()), b: e.running(j.ID, jobs.Hedge())}
	}
	release(4*n, func(i int) {
		r := &races[i/4]
		switch i % 4 {
		case 0:
			_, r.completeA = e.m.Complete(e.ctx, r.a.ID, json.RawMessage(`{"by":"a"}`))
		case 1:
			_, r.completeB = e.m.Complete(e.ctx, r.b.ID, json.RawMessage(`{"by":"b"}`))
		case 2:
			_, r.cancelA = e.m.Cancel(e.ctx, r.a.ID, "stopped")
		case 3:
			_, r.cancelJob = e.m.CancelJob(e.ctx, r.job.ID, "user cancelled")
		}
	})
	for i, r := range races {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := e.with(t)
			j, a, b := e.job(r.job.ID), e.attempt(r.a.ID), e.attempt(r.b.ID)
			deciders := 0
			for _, err := range []error{r.completeA, r.completeB, r.cancelJob} {
				if err == nil {
					deciders++
				}
			}
			if deciders != 1 {
				t.Fatalf("%d calls decided the job, want 1: Complete(a)=%v Complete(b)=%v CancelJob=%v",
					deciders, r.completeA, r.completeB, r.cancelJob)
			}
			if r.completeA == nil && r.cancelA == nil {
				t.Errorf("both Complete(a) and Cancel(a) succeeded")
			}
			switch {
			case r.cancelJob == nil:
				if j.State != jobs.JobCancelled || j.CompletedBy != "" || j.Result != nil {
					t.Errorf("CancelJob won, job = %s completed by %q result %s", j.State, j.CompletedBy, j.Result)
				}
			default:
				winner, loser, loserErr := a, b, r.completeB
				if r.completeB == nil {
					winner, loser, loserErr = b, a, r.completeA
				}
				if j.State != jobs.JobSucceeded || j.CompletedBy != winner.ID || winner.State != jobs.AttemptSucceeded {
					t.Errorf("Complete(%s) won, job = %s completed by %q, attempt %s", winner.ID, j.State, j.CompletedBy, winner.State)
				}
				if want := fmt.Sprintf(`{"by":%q}`, map[string]string{a.ID: "a", b.ID: "b"}[winner.ID]); string(j.Result) != want {
					t.Errorf("job result = %s, want %s", j.Result, want)
				}
				if !errors.Is(r.cancelJob, jobs.ErrJobClosed) {
					t.Errorf("CancelJob after a winner = %v, want ErrJobClosed", r.cancelJob)
				}
				var lost *jobs.LostRaceError
				if errors.As(loserErr, &lost) && (lost.WinnerID != winner.ID || loser.State != jobs.AttemptLost) {
					t.Errorf("loser %s: %v, attempt %s; want lost to %s", loser.ID, loserErr, loser.State, winner.ID)
				}
			}
			for _, c := range []struct {
				att jobs.Attempt
				err error
			}{{a, r.completeA}, {b, r.completeB}} {
				var lost *jobs.LostRaceError
				switch {
				case c.err == nil:
					if c.att.State != jobs.AttemptSucceeded {
						t.Errorf("Complete(%s) succeeded, attempt is %s", c.att.ID, c.att.State)
					}
				case errors.As(c.err, &lost):
					if c.att.State != jobs.AttemptLost {
						t.Errorf("Complete(%s) lost the race, attempt is %s", c.att.ID, c.att.State)
					}
				case errors.Is(c.err, jobs.ErrJobClosed), errors.Is(c.err, jobs.ErrInvalidTransition):
					if c.att.State != jobs.AttemptCancelled {
						t.Errorf("Complete(%s) = %v, attempt is %s, want cancelled", c.att.ID, c.err, c.att.State)
					}
				default:
					t.Errorf("Complete(%s) = %v", c.att.ID, c.err)
				}
			}
			switch {
			case r.cancelA == nil:
				// Its own reason, or the one Complete(a) left when it
				// found the job cancelled: Cancel of a cancelled attempt
				// is a retry, answered with the attempt as it is.
				if a.State != jobs.AttemptCancelled {
					t.Errorf("Cancel(a) succeeded, attempt is %s", a.State)
				}
			case !errors.Is(r.cancelA, jobs.ErrInvalidTransition):
				t.Errorf("Cancel(a) = %v, want ErrInvalidTransition", r.cancelA)
			}
		})
	}
	e.checkInvariants()
}

// testCompleteReturnsRows checks that the job and the attempt that
// Store.CompleteAttempt returns are the rows as stored, for a winner, a
// loser and an attempt of a job cancelled meanwhile.
func testCompleteReturnsRows(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	cases := []struct {
		name   string
		before func(j jobs.Job, other jobs.Attempt)
	}{
		{"winner", func(jobs.Job, jobs.Attempt) {}},
		{"loser", func(_ jobs.Job, other jobs.Attempt) {
			if _, err := e.m.Complete(e.ctx, other.ID, json.RawMessage(`{"by":"other"}`)); err != nil {
				t.Fatal(err)
			}
		}},
		{"job cancelled", func(j jobs.Job, _ jobs.Attempt) {
			if _, err := e.m.CancelJob(e.ctx, j.ID, "user cancelled"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := e.with(t)
			j := e.newJob()
			a, other := e.running(j.ID, jobs.Hedge()), e.running(j.ID, jobs.Hedge())
			c.before(j, other)
			e.clock.Advance(time.Second)
			gotJob, gotAttempt, err := e.store.CompleteAttempt(e.ctx, jobs.Completion{
				AttemptID: a.ID, Result: json.RawMessage(`{"by":"a"}`), At: e.clock.Now().UTC().Truncate(time.Microsecond)})
			if c.name == "winner" && err != nil {
				t.Fatalf("CompleteAttempt: %v", err)
			}
			if diff := cmp.Diff(e.job(j.ID), gotJob); diff != "" {
				t.Errorf("job returned (-stored +returned):\n%s", diff)
			}
			if diff := cmp.Diff(e.attempt(a.ID), gotAttempt); diff != "" {
				t.Errorf("attempt returned (-stored +returned):\n%s", diff)
			}
		})
	}
}

func testRetrySafety(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	again, created, err := e.m.Submit(e.ctx, req(j.Owner, j.Key))
	if err != nil || created || again.ID != j.ID {
		t.Fatalf("repeated Submit = %s, %v, %v", again.ID, created, err)
	}
	a := e.start(j.ID, "")
	for range 2 {
		if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-1"); err != nil {
			t.Fatalf("MarkRunning (repeat) = %v", err)
		}
	}
	res := json.RawMessage(`{"charged":1200}`)
	first, err := e.m.Complete(e.ctx, a.ID, res)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := e.m.Complete(e.ctx, a.ID, res)
		if err != nil {
			t.Fatalf("repeated Complete by the winner = %v, want success", err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("repeated Complete wrote (-first +repeat):\n%s", diff)
		}
	}
	// A context cancelled before the call makes Complete write nothing.
	j2 := e.newJob()
	b := e.start(j2.ID, "")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.m.Complete(ctx, b.ID, res); !errors.Is(err, context.Canceled) {
		t.Fatalf("Complete with a cancelled context = %v", err)
	}
	if got := e.attempt(b.ID); got.State != jobs.AttemptStarting {
		t.Fatalf("attempt = %s after a Complete refused up front, want starting", got.State)
	}
	e.checkInvariants()
}
