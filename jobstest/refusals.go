package jobstest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs"
)

// testStoreRefusals calls the core Store directly, as the Manager never
// would: a store enforces its contract whoever calls it. The refusals of
// a ClaimStore are testClaimRefusals.
func testStoreRefusals(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	terminal := []jobs.AttemptState{jobs.AttemptSucceeded, jobs.AttemptLost, jobs.AttemptFailed, jobs.AttemptCancelled}
	open := []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown}

	// Each terminal attempt, and an open one with a pending job beside it.
	ended := make(map[jobs.AttemptState]jobs.Attempt)
	for _, s := range terminal {
		ended[s] = e.attemptIn(s)
	}
	live := e.attemptIn(jobs.AttemptRunning)
	pending := e.newJob()
	e.clock.Advance(1)

	t.Run("bad input is an InputError and writes nothing", func(t *testing.T) {
		e := e.with(t)
		now := e.clock.Now()
		update := func(to jobs.AttemptState) func() error {
			return func() error {
				_, err := e.store.UpdateAttempt(e.ctx, jobs.AttemptUpdate{ID: live.ID, From: open, To: to, At: now})
				return err
			}
		}
		closeJob := func(to jobs.JobState) func() error {
			return func() error {
				_, err := e.store.CloseJob(e.ctx, jobs.JobClose{ID: pending.ID, To: to, Reason: "r", At: now})
				return err
			}
		}
		tests := []struct {
			name  string
			field string
			call  func() error
		}{
			// An attempt starts only through CreateAttempt, and succeeds or
			// loses only through CompleteAttempt.
			{"UpdateAttempt to starting", "To", update(jobs.AttemptStarting)},
			{"UpdateAttempt to succeeded", "To", update(jobs.AttemptSucceeded)},
			{"UpdateAttempt to lost", "To", update(jobs.AttemptLost)},
			{"UpdateAttempt to no state", "To", update("")},
			{"UpdateAttempt to a state that does not exist", "To", update("paused")},
			// A job succeeds only through CompleteAttempt.
			{"CloseJob to succeeded", "To", closeJob(jobs.JobSucceeded)},
			{"CloseJob to pending", "To", closeJob(jobs.JobPending)},
			{"CloseJob to running", "To", closeJob(jobs.JobRunning)},
			{"CloseJob to no state", "To", closeJob("")},
		}
		for _, tt := range tests {
			before := e.snapshot()
			err := tt.call()
			var in *jobs.InputError
			if !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &in) || in.Field != tt.field {
				t.Errorf("%s: got %v, want an *InputError for %s", tt.name, err, tt.field)
			}
			e.unchanged(before, tt.name)
		}
	})

	t.Run("a terminal attempt never changes, even named in From", func(t *testing.T) {
		e := e.with(t)
		for _, from := range terminal {
			for _, to := range []jobs.AttemptState{jobs.AttemptRunning, jobs.AttemptUnknown, jobs.AttemptFailed, jobs.AttemptCancelled} {
				a := ended[from]
				before := e.snapshot()
				got, err := e.store.UpdateAttempt(e.ctx, jobs.AttemptUpdate{ID: a.ID, To: to, Reason: "again",
					At: e.clock.Now(), From: append([]jobs.AttemptState{from}, open...)})
				var te *jobs.TransitionError
				if !errors.As(err, &te) || te.AttemptID != a.ID || te.From != from || te.To != to {
					t.Errorf("UpdateAttempt %s to %s = %v, want a *TransitionError from %s to %s", from, to, err, from, to)
				}
				if got.ID != a.ID || got.State != from {
					t.Errorf("UpdateAttempt %s to %s returned the attempt as %s %s, want it as stored", from, to, got.ID, got.State)
				}
				e.unchanged(before, fmt.Sprintf("an update of a %s attempt to %s", from, to))
			}
		}
	})
}
