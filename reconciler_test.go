package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// A worker crashed after StartAttempt, before its provider acknowledged: the
// attempt stays starting and blocks the job until the reconciler cancels it.
func TestReconcilerCancelsCrashedWorkersStartingAttempt(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		j := f.submit(t, "k", "alpha")
		a, err := f.m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		alpha := &fakeProvider{name: "alpha", clock: f.clock}
		rec := &jobs.Reconciler{Manager: f.m, Providers: map[string]jobs.Provider{"alpha": alpha},
			StaleAfter: time.Minute, Grace: 3 * time.Minute}

		f.clock.Advance(59 * time.Second)
		if rep, err := rec.ReconcileOnce(ctx); err != nil || rep.Examined != 0 {
			t.Fatalf("before StaleAfter: %+v, %v", rep, err)
		}
		f.clock.Advance(2 * time.Second)
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil || rep.Examined != 1 || rep.Pending != 1 || len(rep.Resolved) != 0 {
			t.Fatalf("within the grace period: %+v, %v", rep, err)
		}
		// Examined once: not again until it is stale again.
		if rep, _ := rec.ReconcileOnce(ctx); rep.Examined != 0 {
			t.Errorf("examined again at once: %+v", rep)
		}
		if _, err := f.m.StartAttempt(ctx, j.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
			t.Fatalf("StartAttempt past a starting attempt = %v", err)
		}
		f.clock.Advance(2 * time.Minute)
		rep, err = rec.ReconcileOnce(ctx)
		if err != nil || len(rep.Resolved) != 1 {
			t.Fatalf("after the grace period: %+v, %v", rep, err)
		}
		res := rep.Resolved[0]
		if res.AttemptID != a.ID || res.From != jobs.AttemptStarting || res.To != jobs.AttemptCancelled {
			t.Errorf("resolution %+v", res)
		}
		if got, _ := f.m.Attempt(ctx, a.ID); got.State != jobs.AttemptCancelled {
			t.Errorf("attempt %s", got.State)
		}
		if alpha.lookups != nil {
			t.Errorf("provider asked about an attempt without a reference: %v", alpha.lookups)
		}
		if _, err := f.m.StartAttempt(ctx, j.ID, ""); err != nil {
			t.Errorf("the job stays blocked: %v", err)
		}
		f.checkInvariants(t)
	})
}

// Running attempts of a crashed worker are resolved by what the provider
// says about their reference.
func TestReconcilerAsksProviderByReference(t *testing.T) {
	tests := []struct {
		name      string
		outcome   *jobs.Outcome // nil: the lookup fails
		wantState jobs.AttemptState
		wantJob   jobs.JobState
	}{
		{"succeeded", &jobs.Outcome{State: jobs.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.AttemptSucceeded, jobs.JobSucceeded},
		{"succeeded off contract", &jobs.Outcome{State: jobs.OutcomeSucceeded, Result: json.RawMessage(`{"text":"x"}`)}, jobs.AttemptFailed, jobs.JobRunning},
		{"failed", &jobs.Outcome{State: jobs.OutcomeFailed, Reason: "content policy"}, jobs.AttemptFailed, jobs.JobRunning},
		{"not found", &jobs.Outcome{State: jobs.OutcomeNotFound}, jobs.AttemptCancelled, jobs.JobRunning},
		{"pending", &jobs.Outcome{State: jobs.OutcomePending}, jobs.AttemptRunning, jobs.JobRunning},
		{"lookup error", nil, jobs.AttemptRunning, jobs.JobRunning},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha := &fakeProvider{name: "alpha", clock: f.clock}
		ids := map[string]jobs.Attempt{}
		for _, tt := range tests {
			j := f.submit(t, tt.name, "alpha")
			a, err := f.m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			ref := "alpha:" + a.ID
			if _, err := f.m.MarkRunning(ctx, a.ID, ref); err != nil {
				t.Fatal(err)
			}
			if tt.outcome != nil {
				alpha.setOutcome(ref, *tt.outcome)
			}
			ids[tt.name] = a
		}
		rec := &jobs.Reconciler{Manager: f.m, Providers: map[string]jobs.Provider{"alpha": alpha}, StaleAfter: time.Minute}
		f.clock.Advance(2 * time.Minute)
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Examined != len(tests) || len(rep.Resolved) != 4 || rep.Pending != 1 || len(rep.Errors) != 1 {
			t.Errorf("report %+v", rep)
		}
		for _, tt := range tests {
			a, _ := f.m.Attempt(ctx, ids[tt.name].ID)
			j, _ := f.m.Get(ctx, a.JobID)
			if a.State != tt.wantState || j.State != tt.wantJob {
				t.Errorf("%s: attempt %s, job %s; want %s, %s", tt.name, a.State, j.State, tt.wantState, tt.wantJob)
			}
		}
		// The pending and the failed lookups are asked again once stale again.
		f.clock.Advance(2 * time.Minute)
		rep, err = rec.ReconcileOnce(ctx)
		if err != nil || rep.Examined != 2 {
			t.Errorf("second pass: %+v, %v", rep, err)
		}
		f.checkInvariants(t)
	})
}

// Several reconcilers in several processes examine the same attempts at
// once: each attempt is resolved exactly once, and its provider is asked
// exactly once.
func TestReconcilersRacingResolveEachAttemptOnce(t *testing.T) {
	const (
		nJobs        = 24
		nReconcilers = 4
	)
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha := &fakeProvider{name: "alpha", clock: f.clock}
		want := map[string]jobs.AttemptState{}
		for i := range nJobs {
			j := f.submit(t, fmt.Sprint("k", i), "alpha")
			a, err := f.m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if i%4 == 3 {
				// Never acknowledged: cancelled after the grace period.
				want[a.ID] = jobs.AttemptCancelled
				continue
			}
			ref := "alpha:" + a.ID
			if _, err := f.m.MarkRunning(ctx, a.ID, ref); err != nil {
				t.Fatal(err)
			}
			if _, err := f.m.MarkUnknown(ctx, a.ID, "timed out"); err != nil {
				t.Fatal(err)
			}
			switch i % 4 {
			case 0:
				alpha.setOutcome(ref, jobs.Outcome{State: jobs.OutcomeSucceeded, Result: json.RawMessage(goodA)})
				want[a.ID] = jobs.AttemptSucceeded
			case 1:
				alpha.setOutcome(ref, jobs.Outcome{State: jobs.OutcomeFailed, Reason: "refused"})
				want[a.ID] = jobs.AttemptFailed
			case 2:
				alpha.setOutcome(ref, jobs.Outcome{State: jobs.OutcomeNotFound})
				want[a.ID] = jobs.AttemptCancelled
			}
		}
		f.clock.Advance(10 * time.Minute)

		recs := make([]*jobs.Reconciler, nReconcilers)
		for i := range recs {
			recs[i] = &jobs.Reconciler{Manager: f.managerOn(f.another()), Providers: map[string]jobs.Provider{"alpha": alpha},
				StaleAfter: time.Minute, BatchSize: 10}
		}
		var (
			mu       sync.Mutex
			resolved = map[string]int{}
			claimed  int
			errs     []error
			wg       sync.WaitGroup
			start    = make(chan struct{})
		)
		for _, rec := range recs {
			wg.Go(func() {
				<-start
				for {
					rep, err := rec.ReconcileOnce(ctx)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					}
					errs = append(errs, rep.Errors...)
					claimed += rep.Claimed + rep.Settled
					for _, r := range rep.Resolved {
						resolved[r.AttemptID]++
					}
					mu.Unlock()
					if err != nil || rep.Examined == 0 {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		t.Logf("%d attempts seen but left to another reconciler", claimed)
		for _, err := range errs {
			t.Errorf("reconcile: %v", err)
		}
		if len(resolved) != nJobs {
			t.Errorf("%d attempts resolved, want %d", len(resolved), nJobs)
		}
		for id, n := range resolved {
			if n != 1 {
				t.Errorf("attempt %s resolved %d times", id, n)
			}
		}
		for ref, n := range alpha.lookups {
			if n != 1 {
				t.Errorf("provider asked %d times about %s", n, ref)
			}
		}
		if len(alpha.lookups) != nJobs*3/4 {
			t.Errorf("provider asked about %d references, want %d", len(alpha.lookups), nJobs*3/4)
		}
		for id, st := range want {
			if a, _ := f.m.Attempt(ctx, id); a.State != st {
				t.Errorf("attempt %s is %s, want %s", id, a.State, st)
			}
		}
		f.checkInvariants(t)
	})
}

// Run reconciles on every tick of its clock until its context ends.
func TestReconcilerRunEveryTick(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		alpha := &fakeProvider{name: "alpha", clock: f.clock}
		rec := &jobs.Reconciler{Manager: f.m, Providers: map[string]jobs.Provider{"alpha": alpha},
			StaleAfter: time.Minute, Clock: f.clock}
		if err := rec.Run(ctx, 0); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("Run(0) = %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx, 30*time.Second) }()

		f.clock.waitTimers(t, 1) // first pass done, nothing to do
		j := f.submit(t, "k", "alpha")
		a, err := f.m.StartAttempt(context.Background(), j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		for range 4 { // 2 minutes: stale and past its grace period
			f.clock.step(t, 1, 30*time.Second)
		}
		f.clock.waitTimers(t, 1)
		if got, _ := f.m.Attempt(context.Background(), a.ID); got.State != jobs.AttemptCancelled {
			t.Errorf("attempt %s after Run's passes, want cancelled", got.State)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Run did not stop")
		}
	})
}
