package failover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// An attempt in doubt without a provider reference — its acknowledgement
// never arrived before the runner's deadline, or its worker crashed before
// the provider answered — is resolved only by what the provider says when
// asked by the attempt's idempotency key, however long ago it started. The
// provider is never asked to do the work of a job twice.
func TestReconcilerResolvesAttemptsWithoutReferenceOnlyByLookupByKey(t *testing.T) {
	tests := []struct {
		name      string
		crashed   bool              // the worker crashed after StartAttempt: starting, never called
		outcome   *failover.Outcome // nil: the lookup fails
		wantState jobs.AttemptState
	}{
		{"ack lost, work done", false, &failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.AttemptSucceeded},
		{"ack lost, still working", false, &failover.Outcome{State: failover.OutcomePending}, jobs.AttemptUnknown},
		{"ack lost, lookup fails", false, nil, jobs.AttemptUnknown},
		{"ack lost, provider failed", false, &failover.Outcome{State: failover.OutcomeFailed, Reason: "quota"}, jobs.AttemptFailed},
		{"ack lost, never received", false, &failover.Outcome{State: failover.OutcomeNotFound}, jobs.AttemptCancelled},
		{"crashed, work done", true, &failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.AttemptSucceeded},
		{"crashed, still working", true, &failover.Outcome{State: failover.OutcomePending}, jobs.AttemptStarting},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha, r := f.ackLostRunner()
		calls := 0
		attempts := map[string]jobs.Attempt{}
		for _, tt := range tests {
			j := f.submit(t, tt.name, "alpha")
			if tt.crashed {
				if _, err := f.m.StartAttempt(ctx, j.ID, ""); err != nil {
					t.Fatal(err)
				}
			} else {
				f.runUntilUnknown(t, r, j.ID, 2) // the provider's delay and the attempt's deadline
				calls++
			}
			as := f.attempts(t, j.ID)
			if len(as) != 1 || as[0].ProviderRef != "" {
				t.Fatalf("%s: attempts %v, ref %q; want one without a reference", tt.name, states(as), as[0].ProviderRef)
			}
			if tt.outcome != nil {
				alpha.setOutcome(as[0].ProviderKey(), *tt.outcome)
			}
			attempts[tt.name] = as[0]
		}
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, StaleAfter: 5 * time.Minute}
		for day := 1; day <= 2; day++ {
			f.clock.Advance(24 * time.Hour) // far past any grace period the clock could offer
			if _, err := rec.ReconcileOnce(ctx); err != nil {
				t.Fatalf("day %d: ReconcileOnce: %v", day, err)
			}
			for _, tt := range tests {
				a, _ := f.m.Attempt(ctx, attempts[tt.name].ID)
				if a.State != tt.wantState {
					t.Errorf("day %d, %s: attempt %s, want %s (%s)", day, tt.name, a.State, tt.wantState, a.Reason)
				}
			}
		}
		for _, tt := range tests {
			a, _ := f.m.Attempt(ctx, attempts[tt.name].ID)
			if a.State != tt.wantState {
				continue // reported above; a Run would call the provider again
			}
			alpha.mu.Lock()
			asked := alpha.lookups[a.ProviderKey()]
			alpha.mu.Unlock()
			if asked == 0 {
				t.Errorf("%s: the provider was never asked about %s", tt.name, a.ProviderKey())
			}
			if tt.wantState.Open() {
				if _, err := r.Run(ctx, a.JobID); !errors.Is(err, jobs.ErrAttemptInFlight) {
					t.Errorf("%s: Run past the attempt in doubt = %v, want ErrAttemptInFlight", tt.name, err)
				}
			}
			if tt.wantState == jobs.AttemptSucceeded {
				j, err := r.Run(ctx, a.JobID)
				if err != nil || j.State != jobs.JobSucceeded || string(j.Result) != goodA {
					t.Errorf("%s: Run after the lookup = %s %s, %v; want the provider's result", tt.name, j.State, j.Result, err)
				}
			}
		}
		if n := alpha.callCount(); n != calls {
			t.Errorf("provider called %d times for %d jobs: an intent was executed twice", n, calls)
		}
		if n := f.ev.Count(failover.EventAttemptReconciled); n != 4 {
			t.Errorf("%d reconciled events, want 4", n)
		}
		f.checkInvariants(t)
	})
}

// ackLostRunner returns a runner over alpha alone, a provider that does
// the work but whose acknowledgements never arrive.
func (f *fixture) ackLostRunner() (*fakeProvider, *failover.Runner) {
	alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Hour, noAck: true, result: json.RawMessage(goodA)}
	r := f.newRunner(alpha, nil)
	r.Fallbacks = nil
	return alpha, r
}

// runUntilUnknown runs the job once with r, whose provider never
// acknowledges, until the attempt's deadline (one of the timers it waits
// for) makes the attempt unknown, and returns the attempt.
func (f *fixture) runUntilUnknown(t *testing.T, r *failover.Runner, jobID string, timers int) jobs.Attempt {
	t.Helper()
	wait := runAsync(context.Background(), r, jobID)
	f.clock.Step(t, timers, r.AttemptTimeout)
	var inFlight *jobs.AttemptInFlightError
	if _, err := wait(t); !errors.As(err, &inFlight) || inFlight.State != jobs.AttemptUnknown {
		t.Fatalf("Run = %v, want ErrAttemptInFlight naming an unknown attempt", err)
	}
	return f.attempts(t, jobID)[0]
}

// refOnlyProvider can look requests up by its reference only, like many
// real APIs: asked by idempotency key, it says it cannot answer.
type refOnlyProvider struct{ *fakeProvider }

func (p refOnlyProvider) Lookup(ctx context.Context, a jobs.Attempt) (failover.Outcome, error) {
	if a.ProviderRef == "" {
		return failover.Outcome{}, fmt.Errorf("%s has no lookup by idempotency key: %w", p.name, failover.ErrLookupUnsupported)
	}
	return p.fakeProvider.Lookup(ctx, a)
}

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An attempt in doubt whose provider cannot look it up without a reference
// stays in doubt, however long it waits: the reconciler reports it for an
// operator (in its report, a warning and an event) and leaves it alone,
// until the operator decides.
func TestReconcilerLeavesAttemptItCannotLookUpToAnOperator(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		alpha, r := f.ackLostRunner()
		r.Providers = map[string]failover.Provider{"alpha": refOnlyProvider{alpha}}
		j := f.submit(t, "k", "alpha")
		a := f.runUntilUnknown(t, r, j.ID, 2)

		var logs syncBuffer
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, StaleAfter: 5 * time.Minute,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		for day := 1; day <= 2; day++ {
			f.clock.Advance(24 * time.Hour)
			rep, err := rec.ReconcileOnce(ctx)
			if err != nil || len(rep.Resolved) != 0 || len(rep.NeedsOperator) != 1 || rep.NeedsOperator[0].ID != a.ID {
				t.Fatalf("day %d: ReconcileOnce = %+v, %v; want the attempt reported for an operator", day, rep, err)
			}
			if got, _ := f.m.Attempt(ctx, a.ID); got.State != jobs.AttemptUnknown {
				t.Fatalf("day %d: attempt %s, want it left unknown", day, got.State)
			}
		}
		out := logs.String()
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "attempt_id="+a.ID) || !strings.Contains(out, "job_id="+j.ID) {
			t.Errorf("no warning naming the attempt and its job:\n%s", out)
		}
		if n := f.ev.Count(failover.EventAttemptNeedsOperator); n != 2 {
			t.Errorf("%d needs-operator events, want one per report", n)
		}
		if n := f.ev.Count(failover.EventAttemptReconciled); n != 0 {
			t.Errorf("%d reconciled events for an attempt nobody resolved", n)
		}
		if _, err := r.Run(ctx, j.ID); !errors.Is(err, jobs.ErrAttemptInFlight) || alpha.callCount() != 1 {
			t.Errorf("Run past the attempt in doubt = %v after %d calls, want ErrAttemptInFlight after 1", err, alpha.callCount())
		}
		// The operator learns from the provider's dashboard that the request
		// never arrived, and says so.
		if _, err := f.m.Cancel(ctx, a.ID, "operator: not in the provider's logs"); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(24 * time.Hour)
		if rep, err := rec.ReconcileOnce(ctx); err != nil || rep.Examined != 0 {
			t.Errorf("after the operator's decision: %+v, %v", rep, err)
		}
		f.checkInvariants(t)
	})
}

// Running attempts of a crashed worker are resolved by what the provider
// says about their reference.
func TestReconcilerAsksProviderByReference(t *testing.T) {
	tests := []struct {
		name      string
		outcome   *failover.Outcome // nil: the lookup fails
		wantState jobs.AttemptState
		wantJob   jobs.JobState
	}{
		{"succeeded", &failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.AttemptSucceeded, jobs.JobSucceeded},
		{"succeeded off contract", &failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`{"text":"x"}`)}, jobs.AttemptFailed, jobs.JobRunning},
		{"succeeded, unusable", &failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`{"summary":`)}, jobs.AttemptFailed, jobs.JobRunning},
		{"failed", &failover.Outcome{State: failover.OutcomeFailed, Reason: "content policy"}, jobs.AttemptFailed, jobs.JobRunning},
		{"not found", &failover.Outcome{State: failover.OutcomeNotFound}, jobs.AttemptCancelled, jobs.JobRunning},
		{"pending", &failover.Outcome{State: failover.OutcomePending}, jobs.AttemptRunning, jobs.JobRunning},
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
		rec := &failover.Reconciler{Manager: f.m, Providers: map[string]failover.Provider{"alpha": alpha}, StaleAfter: time.Minute}
		f.clock.Advance(2 * time.Minute)
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Examined != len(tests) || len(rep.Resolved) != 5 || rep.Pending != 1 || len(rep.Errors) != 1 {
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
				// Never acknowledged: looked up by key, and never received.
				alpha.setOutcome(a.ProviderKey(), failover.Outcome{State: failover.OutcomeNotFound})
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
				alpha.setOutcome(ref, failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)})
				want[a.ID] = jobs.AttemptSucceeded
			case 1:
				alpha.setOutcome(ref, failover.Outcome{State: failover.OutcomeFailed, Reason: "refused"})
				want[a.ID] = jobs.AttemptFailed
			case 2:
				alpha.setOutcome(ref, failover.Outcome{State: failover.OutcomeNotFound})
				want[a.ID] = jobs.AttemptCancelled
			}
		}
		f.clock.Advance(10 * time.Minute)

		recs := f.reconcilers(nReconcilers, alpha, func(r *failover.Reconciler) { r.BatchSize = 10 })
		resolved, sum := raceReconcilers(ctx, recs)
		t.Logf("%d attempts seen but left to another reconciler", sum.Claimed+sum.Settled)
		for _, err := range sum.Errors {
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
		if len(alpha.lookups) != nJobs {
			t.Errorf("provider asked about %d attempts, want %d", len(alpha.lookups), nJobs)
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
		rec := &failover.Reconciler{Manager: f.m, Providers: map[string]failover.Provider{"alpha": alpha},
			StaleAfter: time.Minute}
		if err := rec.Run(ctx, 0); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("Run(0) = %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx, 30*time.Second) }()

		f.clock.WaitTimers(t, 1) // first pass done, nothing to do
		j := f.submit(t, "k", "alpha")
		a, err := f.m.StartAttempt(context.Background(), j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		alpha.setOutcome(a.ProviderKey(), failover.Outcome{State: failover.OutcomeNotFound})
		for range 4 { // 2 minutes: stale
			f.clock.Step(t, 1, 30*time.Second)
		}
		f.clock.WaitTimers(t, 1)
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

// A job cancelled while its attempt was in doubt keeps its key until the
// reconciler learns what the provider did. If the provider acted, its
// late result is dropped, recorded on the attempt (ResultDropped), logged
// at warning level and emitted as an event, and the job keeps its key for
// good; if the provider never received the request, the key is free for a
// new job of the same intent.
func TestReconcilerAfterCancelJobRecordsWhatTheProviderDid(t *testing.T) {
	tests := []struct {
		name       string
		outcome    failover.Outcome
		wantReason string
		dropped    bool
	}{
		{"provider acted", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.ReasonDroppedJobCancelled, true},
		{"never received", failover.Outcome{State: failover.OutcomeNotFound}, "provider never received the request and will not act on it", false},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFixture(t, sc)
				var logs syncBuffer
				f.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				f.m = f.managerOn(f.store)
				ctx := context.Background()
				alpha, r := f.ackLostRunner()
				r.Manager = f.m
				j := f.submit(t, "k", "alpha")
				a := f.runUntilUnknown(t, r, j.ID, 2)
				if _, err := f.m.CancelJob(ctx, j.ID, "the user gave up"); err != nil {
					t.Fatal(err)
				}
				reuse := jobs.SubmitRequest{Owner: j.Owner, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: j.Params,
					Reuse: jobs.KeyReuseAfterFailureOrCancel}
				if _, _, err := f.m.Submit(ctx, reuse); !errors.Is(err, jobs.ErrAttemptInFlight) {
					t.Fatalf("Submit with reuse while the attempt is unknown = %v; want ErrAttemptInFlight", err)
				}

				alpha.setOutcome(a.ProviderKey(), tt.outcome)
				rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, StaleAfter: 5 * time.Minute, Logger: discard}
				f.clock.Advance(24 * time.Hour)
				if rep, err := rec.ReconcileOnce(ctx); err != nil || len(rep.Resolved) != 1 {
					t.Fatalf("ReconcileOnce = %+v, %v; want the attempt resolved", rep, err)
				}
				got, err := f.m.Attempt(ctx, a.ID)
				if err != nil || got.State != jobs.AttemptCancelled || got.Reason != tt.wantReason || got.ResultDropped() != tt.dropped {
					t.Fatalf("attempt = %s %q (dropped %v), %v; want cancelled %q (dropped %v)",
						got.State, got.Reason, got.ResultDropped(), err, tt.wantReason, tt.dropped)
				}
				warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "result dropped") &&
					strings.Contains(logs.String(), "attempt_id="+a.ID)
				if warned != tt.dropped || (f.ev.Count(jobs.EventResultDropped) == 1) != tt.dropped {
					t.Errorf("warning logged %v, %d %s events; want both only when the provider acted:\n%s",
						warned, f.ev.Count(jobs.EventResultDropped), jobs.EventResultDropped, logs.String())
				}

				n, created, err := f.m.Submit(ctx, reuse)
				switch {
				case err != nil:
					t.Fatalf("Submit with reuse once resolved = %v", err)
				case tt.dropped && (created || n.ID != j.ID):
					t.Errorf("Submit with reuse after the provider acted = %s, created=%v; want the cancelled job %s", n.ID, created, j.ID)
				case !tt.dropped && (!created || n.ID == j.ID):
					t.Errorf("Submit with reuse after the provider never received it = %s, created=%v; want a new job", n.ID, created)
				}
				if calls := alpha.callCount(); calls != 1 {
					t.Errorf("the provider was called %d times, want 1", calls)
				}
				f.checkInvariants(t)
			})
		}
	})
}
