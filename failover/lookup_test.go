package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// Each lookup a reconciler makes is recorded with its answer, on every
// store that keeps lookups: a failed lookup, then pending, then the answer
// that resolves the attempt. The record changes nothing else.
func TestReconcilerRecordsEachLookup(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha, r := f.ackLostRunner()
		j := f.submit(t, "k", "alpha")
		a := f.runUntilUnknown(t, r, j.ID, 2)
		ls, ok := f.store.(jobs.LookupStore)
		if !ok {
			t.Skipf("a %T keeps no lookups", f.store)
		}
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, RecheckAfter: time.Second}
		last := func() jobs.ReconcileState {
			t.Helper()
			states, err := ls.ReconcileStates(ctx, []string{a.ID})
			if err != nil || len(states) != 1 {
				t.Fatalf("ReconcileStates = %v, %v", states, err)
			}
			return states[0]
		}
		for _, step := range []struct {
			outcome *failover.Outcome
			want    string
			state   jobs.AttemptState
		}{
			{nil, "error: alpha: lookup " + a.ProviderKey() + ": not scripted", jobs.AttemptUnknown},
			{&failover.Outcome{State: failover.OutcomePending}, "pending", jobs.AttemptUnknown},
			{&failover.Outcome{State: failover.OutcomeFailed, Reason: "card declined"}, "failed: card declined", jobs.AttemptFailed},
		} {
			if step.outcome != nil {
				alpha.setOutcome(a.ProviderKey(), *step.outcome)
			}
			f.clock.Advance(time.Minute)
			if _, err := rec.ReconcileOnce(ctx); err != nil {
				t.Fatal(err)
			}
			got := last()
			if got.LookupAnswer != step.want || !got.LookupAt.Equal(f.clock.Now()) || !strings.HasPrefix(got.ClaimToken, "clm_") {
				t.Errorf("after a lookup answered %q: %+v at %v", step.want, got, f.clock.Now())
			}
			if st := f.attempts(t, j.ID)[0].State; st != step.state {
				t.Errorf("attempt %s after %q, want %s", st, step.want, step.state)
			}
		}
	})
}

// ReconcileAttempt looks an attempt up at once, whatever its age, and
// refuses one that is no longer in doubt, or that does not exist.
func TestReconcileAttemptNow(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha, r := f.ackLostRunner()
		j := f.submit(t, "k", "alpha")
		a := f.runUntilUnknown(t, r, j.ID, 2)
		alpha.setOutcome(a.ProviderKey(), failover.Outcome{State: failover.OutcomeSucceeded, Result: []byte(goodA)})
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, RecheckAfter: time.Hour, StaleAfter: time.Hour}

		rep, err := rec.ReconcileAttempt(ctx, a.ID)
		if err != nil || len(rep.Resolved) != 1 || rep.Resolved[0].To != jobs.AttemptSucceeded {
			t.Fatalf("ReconcileAttempt = %+v, %v; want the attempt resolved as succeeded", rep, err)
		}
		if got, _ := f.m.Get(ctx, j.ID); got.State != jobs.JobSucceeded {
			t.Errorf("job %s, want succeeded", got.State)
		}
		_, err = rec.ReconcileAttempt(ctx, a.ID)
		if !errors.Is(err, jobs.ErrInvalidTransition) {
			t.Errorf("ReconcileAttempt of a resolved attempt = %v, want ErrInvalidTransition", err)
		}
		if _, err := rec.ReconcileAttempt(ctx, "att_00000000000000000000000000"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("ReconcileAttempt of no attempt = %v, want ErrNotFound", err)
		}
		if n := alpha.lookups[a.ProviderKey()]; n != 1 {
			t.Errorf("%d lookups, want 1", n)
		}
	})
}
