package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// heldProvider is a provider whose lookups can be held at their start, for
// tests of reconcilers racing. Every Lookup records that it is under way
// (and how many lookups of the same request are under way at once), runs
// onLookup, and, if it is the first lookup of a request whose gate is set,
// announces itself on entered and waits for the gate to close. It answers
// the n-th lookup of a request with its n-th scripted answer (the last one
// for any later lookup). Call, for runners, never acknowledges and gives
// up when its context ends: the provider keeps the work.
type heldProvider struct {
	entered  chan string                   // keys of held lookups, as they start
	onLookup func(first bool)              // runs as each lookup starts; first: the request's first lookup
	mu       sync.Mutex                    //
	answers  map[string][]failover.Outcome // by lookup key
	gates    map[string]chan struct{}      // the first lookup of a key waits until its gate closes
	lookups  map[string]int                // lookups begun, by key
	active   map[string]int                // lookups under way, by key
	overlaps map[string]int                // lookups begun while another of the same key was under way
	calls    map[string]int                // Calls, by job ID
}

func newHeldProvider() *heldProvider {
	return &heldProvider{entered: make(chan string, 100), answers: map[string][]failover.Outcome{}, gates: map[string]chan struct{}{},
		lookups: map[string]int{}, active: map[string]int{}, overlaps: map[string]int{}, calls: map[string]int{}}
}

func lookupKeyOf(a jobs.Attempt) string {
	if a.ProviderRef != "" {
		return a.ProviderRef
	}
	return a.ProviderKey()
}

// script sets the answers to the lookups of key, in order.
func (p *heldProvider) script(key string, answers ...failover.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[key] = answers
}

// hold makes the first lookup of key wait; the returned func lets it go.
func (p *heldProvider) hold(key string) (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gates[key] = gate
	p.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

func (p *heldProvider) Call(ctx context.Context, job jobs.Job, _ jobs.Attempt, _ func(string) error) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls[job.ID]++
	p.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (p *heldProvider) Lookup(ctx context.Context, a jobs.Attempt) (failover.Outcome, error) {
	key := lookupKeyOf(a)
	p.mu.Lock()
	n := p.lookups[key]
	p.lookups[key]++
	if p.active[key] > 0 {
		p.overlaps[key]++
	}
	p.active[key]++
	gate := p.gates[key]
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.active[key]--
		p.mu.Unlock()
	}()
	if p.onLookup != nil {
		p.onLookup(n == 0)
	}
	if n == 0 && gate != nil {
		p.entered <- key
		select {
		case <-gate:
		case <-ctx.Done():
			return failover.Outcome{}, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	as := p.answers[key]
	if len(as) == 0 {
		return failover.Outcome{}, fmt.Errorf("lookup %s: not scripted", key)
	}
	return as[min(n, len(as)-1)], nil
}

func (p *heldProvider) count(m map[string]int, key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m[key]
}

// awaitLookup waits for a held lookup to start and returns its key. It
// fails the test after 20 s of real time.
func (p *heldProvider) awaitLookup(t *testing.T) string {
	t.Helper()
	select {
	case key := <-p.entered:
		return key
	case <-time.After(20 * time.Second):
		t.Fatal("no lookup started")
		return ""
	}
}

// reconcileAsync runs one pass of rec in a goroutine; the returned func
// waits for its report.
func reconcileAsync(ctx context.Context, rec *failover.Reconciler) func(t *testing.T) failover.ReconcileReport {
	ch := make(chan failover.ReconcileReport, 1)
	go func() {
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil {
			rep.Errors = append(rep.Errors, err)
		}
		ch <- rep
	}()
	return func(t *testing.T) failover.ReconcileReport {
		t.Helper()
		select {
		case rep := <-ch:
			return rep
		case <-time.After(30 * time.Second):
			t.Fatal("ReconcileOnce did not return")
			return failover.ReconcileReport{}
		}
	}
}

// reconcilers returns n reconcilers over p, each on a store handle of its
// own, as reconcilers in n processes would be.
func (f *fixture) reconcilers(n int, p failover.Provider, configure func(*failover.Reconciler)) []*failover.Reconciler {
	recs := make([]*failover.Reconciler, n)
	for i := range recs {
		recs[i] = &failover.Reconciler{Manager: f.managerOn(f.another()), Providers: map[string]failover.Provider{"alpha": p},
			StaleAfter: time.Minute}
		if configure != nil {
			configure(recs[i])
		}
	}
	return recs
}

// raceReconcilers releases recs together, each reconciling until a pass
// finds nothing to do. It returns how often each attempt was resolved, and
// the sum of the reports' counts and errors.
func raceReconcilers(ctx context.Context, recs []*failover.Reconciler) (resolved map[string]int, sum failover.ReconcileReport) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	resolved = map[string]int{}
	for _, rec := range recs {
		wg.Go(func() {
			<-start
			for {
				rep, err := rec.ReconcileOnce(ctx)
				mu.Lock()
				if err != nil {
					sum.Errors = append(sum.Errors, err)
				}
				sum.Errors = append(sum.Errors, rep.Errors...)
				sum.Claimed += rep.Claimed
				sum.Settled += rep.Settled
				sum.TakenOver += rep.TakenOver
				sum.Pending += rep.Pending
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
	return resolved, sum
}

// unknownAfterTimeout runs job j on p once, with an acknowledgement that
// never arrives, until the attempt's deadline makes it unknown, and returns
// the attempt.
func (f *fixture) unknownAfterTimeout(t *testing.T, p *heldProvider, j jobs.Job) jobs.Attempt {
	t.Helper()
	r := &failover.Runner{Manager: f.m, Providers: map[string]failover.Provider{"alpha": p}, AttemptTimeout: time.Minute}
	return f.runUntilUnknown(t, r, j.ID, 1)
}

// A lookup that takes longer than the recheck interval (the lease of
// claims that were only a touch of updated_at) keeps its claim: a second
// reconciler leaves the attempt alone, and the provider is asked once.
func TestReconcilerSlowLookupKeepsItsClaim(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		p := newHeldProvider()
		j := f.submit(t, "k", "alpha")
		a, err := f.m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.m.MarkRunning(ctx, a.ID, "alpha-req-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.m.MarkUnknown(ctx, a.ID, "no result within 1m0s"); err != nil {
			t.Fatal(err)
		}
		p.script("alpha-req-1", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)})
		let := p.hold("alpha-req-1")
		defer let()
		recs := f.reconcilers(2, p, nil)
		f.clock.Advance(time.Minute)

		waitA := reconcileAsync(ctx, recs[0])
		p.awaitLookup(t)
		// The lookup has taken 25 s so far: more than RecheckAfter, less
		// than LookupTimeout. The provider may still answer.
		f.clock.Advance(25 * time.Second)
		repB, err := recs[1].ReconcileOnce(ctx)
		if err != nil || repB.Examined != 0 || len(repB.Resolved) != 0 {
			t.Errorf("second reconciler during the lookup: %+v, %v; want the attempt left to the first", repB, err)
		}
		let()
		repA := waitA(t)
		if len(repA.Errors) != 0 || len(repA.Resolved) != 1 || repA.Resolved[0].To != jobs.AttemptSucceeded {
			t.Errorf("first reconciler: %+v; want the attempt resolved", repA)
		}
		if n := p.count(p.lookups, "alpha-req-1"); n != 1 {
			t.Errorf("provider asked %d times", n)
		}
		if n := f.ev.Count(failover.EventAttemptReconciled); n != 1 {
			t.Errorf("%d reconciled events, want 1", n)
		}
		if got, _ := f.m.Get(ctx, j.ID); got.State != jobs.JobSucceeded || string(got.Result) != goodA {
			t.Errorf("job %s with %s", got.State, got.Result)
		}
		f.checkInvariants(t)
	})
}

// A reconciler whose lookup outlives its lease (a paused process) is taken
// over by another, which asks the provider again and records its answer.
// The first one's late answer is then refused, whatever it says: the
// attempt is resolved once, by the holder of the claim, and the intent is
// never executed twice.
func TestReconcilerLateAnswerAfterTakeoverIsRefused(t *testing.T) {
	succeeded := func(r string) failover.Outcome {
		return failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(r)}
	}
	tests := []struct {
		name       string
		late, next failover.Outcome // the first reconciler's answer, the one after the takeover
		wantState  jobs.AttemptState
		wantResult string // the job's, when succeeded
		wantEvents int
	}{
		{"late result after the takeover's", succeeded(goodB), succeeded(goodA), jobs.AttemptSucceeded, goodA, 1},
		{"late not found after the takeover's pending", failover.Outcome{State: failover.OutcomeNotFound}, failover.Outcome{State: failover.OutcomePending}, jobs.AttemptUnknown, "", 0},
		{"late result after the takeover's failure", succeeded(goodB), failover.Outcome{State: failover.OutcomeFailed, Reason: "refused"}, jobs.AttemptFailed, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, sc storeCase) {
				f := newFixture(t, sc)
				ctx := context.Background()
				p := newHeldProvider()
				j := f.submit(t, "k", "alpha")
				a := f.unknownAfterTimeout(t, p, j)
				p.script(a.ProviderKey(), tt.late, tt.next)
				let := p.hold(a.ProviderKey())
				defer let()
				recs := f.reconcilers(2, p, nil)
				f.clock.Advance(time.Minute)

				waitA := reconcileAsync(ctx, recs[0])
				p.awaitLookup(t)
				f.clock.Advance(10 * time.Minute) // far past any lease: the first reconciler counts as gone
				repB, err := recs[1].ReconcileOnce(ctx)
				if err != nil || len(repB.Errors) != 0 || repB.Examined != 1 {
					t.Fatalf("takeover: %+v, %v", repB, err)
				}
				let()
				repA := waitA(t)
				if repA.TakenOver != 1 || len(repA.Resolved) != 0 || repA.Pending != 0 || len(repA.Errors) != 0 {
					t.Errorf("late reconciler: %+v; want its answer refused as taken over", repA)
				}
				got, _ := f.m.Attempt(ctx, a.ID)
				if got.State != tt.wantState {
					t.Errorf("attempt %s (%s), want %s", got.State, got.Reason, tt.wantState)
				}
				if n := f.ev.Count(failover.EventAttemptReconciled); n != tt.wantEvents {
					t.Errorf("%d reconciled events, want %d", n, tt.wantEvents)
				}
				job, _ := f.m.Get(ctx, j.ID)
				if tt.wantResult != "" && string(job.Result) != tt.wantResult {
					t.Errorf("job result %s, want %s", job.Result, tt.wantResult)
				}
				if got.State.Open() {
					// Pending: looked at again RecheckAfter after that answer, not before.
					f.clock.Advance(failover.DefaultRecheckAfter - time.Microsecond)
					if rep, err := recs[0].ReconcileOnce(ctx); err != nil || rep.Examined != 0 {
						t.Errorf("before RecheckAfter: %+v, %v", rep, err)
					}
					f.clock.Advance(time.Microsecond)
					if rep, err := recs[0].ReconcileOnce(ctx); err != nil || rep.Examined != 1 || rep.Pending != 1 {
						t.Errorf("after RecheckAfter: %+v, %v", rep, err)
					}
				}
				// Nothing runs the intent again: the job is done, or still in doubt.
				r := &failover.Runner{Manager: f.m, Providers: map[string]failover.Provider{"alpha": p}}
				if job.State == jobs.JobSucceeded || got.State.Open() {
					if _, err := r.Run(ctx, j.ID); err != nil && !errors.Is(err, jobs.ErrAttemptInFlight) {
						t.Errorf("Run = %v", err)
					}
					if n := p.count(p.calls, j.ID); n != 1 {
						t.Errorf("provider called %d times for the job", n)
					}
				}
				f.checkInvariants(t)
			})
		})
	}
}

// A runner's own result that arrives while a reconciler asks the provider
// is recorded at once, claim or no claim; the reconciler's answer then
// finds the attempt resolved and reports nothing as its own, whatever the
// provider told it.
func TestReconcilerYieldsToRunnersResultDuringLookup(t *testing.T) {
	tests := []struct {
		name   string
		answer failover.Outcome
	}{
		{"result", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}},
		{"result off contract", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`{"text":"x"}`)}},
		{"unusable result", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`not json`)}},
		{"failure", failover.Outcome{State: failover.OutcomeFailed, Reason: "refused"}},
		{"not found", failover.Outcome{State: failover.OutcomeNotFound}},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		p := newHeldProvider()
		rec := f.reconcilers(1, p, nil)[0]
		for _, tt := range tests {
			j := f.submit(t, tt.name, "alpha")
			a, err := f.m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			ref := "alpha-" + a.ID
			if _, err := f.m.MarkRunning(ctx, a.ID, ref); err != nil {
				t.Fatal(err)
			}
			p.script(ref, tt.answer)
			let := p.hold(ref)
			f.clock.Advance(2 * time.Minute) // stale: its worker looks gone

			wait := reconcileAsync(ctx, rec)
			p.awaitLookup(t)
			// The worker was only slow: its result arrives now.
			if _, err := f.m.Complete(ctx, a.ID, json.RawMessage(goodB)); err != nil {
				t.Errorf("%s: the runner's Complete during the lookup = %v", tt.name, err)
			}
			let()
			rep := wait(t)
			if rep.Settled != 1 || len(rep.Resolved) != 0 || len(rep.Errors) != 0 {
				t.Errorf("%s: reconciler: %+v; want the attempt found settled", tt.name, rep)
			}
			if got, _ := f.m.Get(ctx, j.ID); got.State != jobs.JobSucceeded || string(got.Result) != goodB {
				t.Errorf("%s: job %s with %s, want the runner's result", tt.name, got.State, got.Result)
			}
			if got, _ := f.m.Attempt(ctx, a.ID); got.State != jobs.AttemptSucceeded {
				t.Errorf("%s: attempt %s (%s)", tt.name, got.State, got.Reason)
			}
		}
		if n := f.ev.Count(failover.EventAttemptReconciled); n != 0 {
			t.Errorf("%d reconciled events for attempts the runner resolved", n)
		}
		f.checkInvariants(t)
	})
}

// Many reconcilers, released together, race over the same attempts in
// doubt, and every lookup is slow: each takes 11 s of the clock, longer
// than RecheckAfter. Each attempt is claimed by one live reconciler at a
// time, its provider asked once, and it is resolved once, with one
// reconciled event.
func TestReconcilersRacingOverSlowLookupsResolveEachAttemptOnce(t *testing.T) {
	const (
		nJobs        = 24
		nReconcilers = 6
		lookupTakes  = 11 * time.Second
	)
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		p := newHeldProvider()
		p.onLookup = func(first bool) {
			if first {
				f.clock.Advance(lookupTakes)
			}
		}
		outcomes := []struct {
			o    failover.Outcome
			want jobs.AttemptState
		}{
			{failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)}, jobs.AttemptSucceeded},
			{failover.Outcome{State: failover.OutcomeFailed, Reason: "refused"}, jobs.AttemptFailed},
			{failover.Outcome{State: failover.OutcomeNotFound}, jobs.AttemptCancelled},
			{failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`{"text":"off contract"}`)}, jobs.AttemptFailed},
		}
		want := map[string]jobs.AttemptState{}
		keys := map[string]string{}
		for i := range nJobs {
			j := f.submit(t, fmt.Sprint("k", i), "alpha")
			var a jobs.Attempt
			switch i % 3 {
			case 0: // acknowledged, then timed out
				var err error
				if a, err = f.m.StartAttempt(ctx, j.ID, ""); err == nil {
					if a, err = f.m.MarkRunning(ctx, a.ID, "alpha-"+a.ID); err == nil {
						a, err = f.m.MarkUnknown(ctx, a.ID, "timeout")
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			case 1: // the acknowledgement never arrived
				a = f.unknownAfterTimeout(t, p, j)
			case 2: // the worker crashed before calling the provider
				var err error
				if a, err = f.m.StartAttempt(ctx, j.ID, ""); err != nil {
					t.Fatal(err)
				}
			}
			oc := outcomes[i%len(outcomes)]
			p.script(lookupKeyOf(a), oc.o)
			want[a.ID], keys[a.ID] = oc.want, lookupKeyOf(a)
		}
		f.clock.Advance(10 * time.Minute)

		// Lookups are slow on the clock, not in real time: a lease longer
		// than the whole test's clock time leaves no claim to expire.
		recs := f.reconcilers(nReconcilers, p, func(r *failover.Reconciler) {
			r.BatchSize = 5
			r.LookupTimeout = nJobs * lookupTakes
		})
		resolved, report := raceReconcilers(ctx, recs)
		t.Logf("claims lost to another reconciler: %d; found settled: %d", report.Claimed, report.Settled)
		for _, err := range report.Errors {
			t.Errorf("reconcile: %v", err)
		}
		if report.TakenOver != 0 {
			t.Errorf("%d claims taken over while their reconciler was alive", report.TakenOver)
		}
		reconciled := map[string]int{}
		for _, ev := range f.ev.Snapshot() {
			if ev.Type == failover.EventAttemptReconciled {
				reconciled[ev.AttemptID]++
			}
		}
		for id, st := range want {
			key := keys[id]
			if n := p.count(p.lookups, key); n != 1 {
				t.Errorf("attempt %s: provider asked %d times", id, n)
			}
			if n := p.count(p.overlaps, key); n != 0 {
				t.Errorf("attempt %s: %d lookups while another was under way", id, n)
			}
			if resolved[id] != 1 || reconciled[id] != 1 {
				t.Errorf("attempt %s: resolved %d times, %d reconciled events; want 1 and 1", id, resolved[id], reconciled[id])
			}
			if a, _ := f.m.Attempt(ctx, id); a.State != st {
				t.Errorf("attempt %s is %s, want %s", id, a.State, st)
			}
		}
		f.checkInvariants(t)
	})
}
