package failover_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
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

// noLookups is a store that claims attempts but keeps no lookups, as a
// store written by a third party may be.
type noLookups struct {
	jobs.Store
	jobs.ClaimStore
}

// A Reconciler over a store that keeps no lookups resolves attempts all
// the same, and reports no error for the lookups it cannot record.
func TestReconcilerWithoutLookupStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	inner := memstore.New()
	s := noLookups{inner, inner}
	if _, ok := jobs.Store(s).(jobs.LookupStore); ok {
		t.Fatal("the wrapper keeps lookups")
	}
	clock := newFakeClock()
	m := jobstest.NewManager(t, s, jobs.Options{Clock: clock, Logger: discard})
	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "alpha", Params: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MarkUnknown(ctx, a.ID, "timed out"); err != nil {
		t.Fatal(err)
	}
	alpha := &fakeProvider{name: "alpha", clock: clock}
	alpha.setOutcome(a.ProviderKey(), failover.Outcome{State: failover.OutcomeSucceeded, Result: []byte(`{"ok":true}`)})
	rec := &failover.Reconciler{Manager: m, Providers: map[string]failover.Provider{"alpha": alpha}, Logger: discard}
	rep, err := rec.ReconcileAttempt(ctx, a.ID)
	if err != nil || len(rep.Errors) != 0 || len(rep.Resolved) != 1 || rep.Resolved[0].To != jobs.AttemptSucceeded {
		t.Fatalf("ReconcileAttempt = %+v, %v; want the attempt resolved, without errors", rep, err)
	}
}
