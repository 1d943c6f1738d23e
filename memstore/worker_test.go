package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

// silentProvider takes every request and never acknowledges it: its
// acknowledgements are lost on the way back. The work itself finishes when
// the test says so, and Lookup then finds it by the attempt's idempotency
// key.
type silentProvider struct {
	result json.RawMessage

	mu      sync.Mutex
	calls   []string // idempotency keys received
	lookups []string // idempotency keys asked about
	done    bool     // the work is finished
}

func (p *silentProvider) Call(ctx context.Context, _ jobs.Job, a jobs.Attempt, _ func(string) error) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls = append(p.calls, a.ProviderKey())
	p.mu.Unlock()
	<-ctx.Done() // no answer reaches the caller before it gives up
	return nil, ctx.Err()
}

func (p *silentProvider) Lookup(_ context.Context, a jobs.Attempt) (failover.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups = append(p.lookups, a.ProviderKey())
	switch {
	case !slices.Contains(p.calls, a.ProviderKey()):
		return failover.Outcome{State: failover.OutcomeNotFound}, nil
	case !p.done:
		return failover.Outcome{State: failover.OutcomePending}, nil
	}
	return failover.Outcome{State: failover.OutcomeSucceeded, Result: p.result}, nil
}

func (p *silentProvider) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
}

func (p *silentProvider) counts() (calls, lookups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls), len(p.lookups)
}

// A worker's test over a memory store, end to end: a Runner's attempt
// times out without an answer and becomes unknown; the job stays in doubt
// however much time passes while the provider is still working; once the
// provider has finished, a Reconciler that looks the request up by its
// idempotency key completes the job with the provider's result. The
// provider is called once.
func TestRunnerTimeoutIsResolvedByReconcilerLookupByKey(t *testing.T) {
	ctx := t.Context()
	clock := jobstest.NewClock(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	m := jobstest.NewManager(t, memstore.New(), jobs.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	acme := &silentProvider{result: json.RawMessage(`{"charged":1200}`)}
	providers := map[string]failover.Provider{"acme": acme}
	runner := &failover.Runner{Manager: m, Providers: providers, AttemptTimeout: time.Minute}
	rec := &failover.Reconciler{Manager: m, Providers: providers, RecheckAfter: 10 * time.Second}

	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "user-42", Key: "checkout-1", Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200}`)})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		_, err := runner.Run(ctx, j.ID)
		ran <- err
	}()
	clock.Step(t, 1, time.Minute) // the attempt's deadline, the one timer of the run
	err = <-ran
	var inflight *jobs.AttemptInFlightError
	if !errors.As(err, &inflight) || inflight.State != jobs.AttemptUnknown {
		t.Fatalf("Run past the deadline = %v, want ErrAttemptInFlight naming an unknown attempt", err)
	}
	a, err := m.Attempt(ctx, inflight.AttemptID)
	if err != nil || a.State != jobs.AttemptUnknown || a.ProviderRef != "" || a.JobID != j.ID {
		t.Fatalf("attempt = %+v, %v; want unknown without a reference", a, err)
	}

	pass := func(label string) failover.ReconcileReport {
		t.Helper()
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil || len(rep.Errors) > 0 {
			t.Fatalf("%s: ReconcileOnce = %+v, %v", label, rep, err)
		}
		return rep
	}
	stillInDoubt := func(label string) {
		t.Helper()
		if a, _ := m.Attempt(ctx, a.ID); a.State != jobs.AttemptUnknown {
			t.Fatalf("%s: attempt is %s, want still unknown", label, a.State)
		}
		if _, err := runner.Run(ctx, j.ID); !errors.As(err, &inflight) || inflight.AttemptID != a.ID {
			t.Fatalf("%s: Run = %v, want ErrAttemptInFlight naming %s", label, err, a.ID)
		}
	}

	if rep := pass("at once"); rep.Examined != 0 {
		t.Errorf("a pass right after the timeout examined %d attempts, want none before RecheckAfter", rep.Examined)
	}
	clock.Advance(11 * time.Second) // past RecheckAfter
	if rep := pass("provider still working"); rep.Examined != 1 || rep.Pending != 1 {
		t.Errorf("report %+v, want the attempt examined and pending", rep)
	}
	stillInDoubt("provider still working")
	clock.Advance(24 * time.Hour) // time alone resolves nothing
	pass("a day later")
	stillInDoubt("a day later")

	acme.finish()
	clock.Advance(11 * time.Second) // past RecheckAfter
	rep := pass("provider finished")
	if len(rep.Resolved) != 1 || rep.Resolved[0].AttemptID != a.ID || rep.Resolved[0].To != jobs.AttemptSucceeded {
		t.Fatalf("report %+v, want the attempt resolved as succeeded", rep)
	}
	done, err := runner.Run(ctx, j.ID) // a worker's retry finds the job done
	if err != nil || done.State != jobs.JobSucceeded || done.CompletedBy != a.ID || string(done.Result) != `{"charged":1200}` {
		t.Fatalf("Run after reconciliation = %s by %s with %s, %v; want succeeded by %s with the provider's result",
			done.State, done.CompletedBy, done.Result, err, a.ID)
	}
	if calls, lookups := acme.counts(); calls != 1 || lookups != 3 {
		t.Errorf("provider called %d times and asked %d times; want 1 call and 3 lookups", calls, lookups)
	}
	if vs, err := invariant.Check(ctx, m.Store().(invariant.Store)); err != nil || len(vs) > 0 {
		t.Errorf("CheckInvariants = %v, %v", vs, err)
	}
}
