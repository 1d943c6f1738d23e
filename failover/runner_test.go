package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

const (
	goodA = `{"summary":"from alpha"}`
	goodB = `{"summary":"from beta"}`
)

// newRunner returns a runner over alpha (the target) and beta (fallback).
func (f *fixture) newRunner(alpha, beta *fakeProvider) *failover.Runner {
	return &failover.Runner{
		Manager:        f.m,
		Providers:      map[string]failover.Provider{"alpha": alpha, "beta": beta},
		Fallbacks:      []string{"beta"},
		AttemptTimeout: time.Minute,
	}
}

// The race of cas.go (finishing order decides): A departs first and returns after 30 s; B, a
// hedge, departs second and returns after 5 s. B wins; A's result is dropped.
func TestRunnerHedgeRaceLaterStartEarlierFinishWins(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: 30 * time.Second, result: json.RawMessage(goodA)}
		beta := &fakeProvider{name: "beta", clock: f.clock, delay: 5 * time.Second, result: json.RawMessage(goodB)}
		r := f.newRunner(alpha, beta)
		r.HedgeAfter = 10 * time.Second
		j := f.submit(t, "race", "alpha")

		wait := runAsync(context.Background(), r, j.ID)
		f.clock.Step(t, 3, 10*time.Second) // hedge timer, A's deadline, A's provider delay
		f.clock.Step(t, 4, 5*time.Second)  // + B's deadline and delay, - hedge timer: B returns at 15 s
		f.clock.Step(t, 2, 15*time.Second) // A's delay and deadline remain: A returns at 30 s
		got, err := wait(t)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		as := f.attempts(t, j.ID)
		if len(as) != 2 {
			t.Fatalf("attempts %v, want 2", states(as))
		}
		a, b := as[0], as[1]
		if got.State != jobs.JobSucceeded || got.CompletedBy != b.ID || string(got.Result) != goodB {
			t.Errorf("job %s completed by %s with %s; want B (%s) with %s", got.State, got.CompletedBy, got.Result, b.ID, goodB)
		}
		if a.Provider != "alpha" || a.State != jobs.AttemptLost || a.Hedge {
			t.Errorf("A = %s %s hedge=%v, want alpha lost", a.Provider, a.State, a.Hedge)
		}
		if b.Provider != "beta" || b.State != jobs.AttemptSucceeded || !b.Hedge {
			t.Errorf("B = %s %s hedge=%v, want beta succeeded hedge", b.Provider, b.State, b.Hedge)
		}
		if a.ProviderRef != "alpha:"+a.ID || b.ProviderRef != "beta:"+b.ID {
			t.Errorf("references %q %q not recorded", a.ProviderRef, b.ProviderRef)
		}
		if f.ev.Count(jobs.EventRaceLost) != 1 || f.ev.Count(failover.EventHedgeStarted) != 1 {
			t.Errorf("events: %d lost races, %d hedges; want 1 each", f.ev.Count(jobs.EventRaceLost), f.ev.Count(failover.EventHedgeStarted))
		}
		if stored, _ := f.m.Get(context.Background(), j.ID); string(stored.Result) != goodB {
			t.Errorf("stored result %s", stored.Result)
		}
		f.checkInvariants(t)
	})
}

// A primary that answers "successfully" with nothing usable fails its
// attempt, and the runner fails over to the verified fallback.
func TestRunnerOffContractResultFailsOver(t *testing.T) {
	tests := []struct{ name, result string }{
		{"empty body", ``},
		{"not JSON", `<html>OK</html>`},
		{"empty object", `{}`},
		{"null", `null`},
		{"off format", `{"answer":"from alpha"}`},
		{"wrong type", `{"summary":["a","b"]}`},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		for _, tt := range tests {
			alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Second, result: json.RawMessage(tt.result)}
			beta := &fakeProvider{name: "beta", clock: f.clock, delay: time.Second, result: json.RawMessage(goodB)}
			r := f.newRunner(alpha, beta)
			j := f.submit(t, "k-"+tt.name, "alpha")
			wait := runAsync(context.Background(), r, j.ID)
			f.clock.Step(t, 2, time.Second) // alpha: deadline + delay
			f.clock.Step(t, 2, time.Second) // beta
			got, err := wait(t)
			if err != nil {
				t.Fatalf("%s: Run: %v", tt.name, err)
			}
			as := f.attempts(t, j.ID)
			if !slices.Equal(states(as), []string{"alpha=failed", "beta=succeeded"}) {
				t.Fatalf("%s: attempts %v", tt.name, states(as))
			}
			if string(got.Result) != goodB || got.CompletedBy != as[1].ID {
				t.Errorf("%s: job result %s by %s", tt.name, got.Result, got.CompletedBy)
			}
			if as[1].Hedge {
				t.Errorf("%s: failover after a failure is not a hedge", tt.name)
			}
			if !strings.Contains(as[0].Reason, "contract") && !strings.Contains(as[0].Reason, "unusable") {
				t.Errorf("%s: primary's reason %q", tt.name, as[0].Reason)
			}
		}
		f.checkInvariants(t)
	})
}

// Failover to a fallback that was never verified (or failed verification)
// is refused: the runner does not start it and reports that no provider is
// left.
func TestRunnerRefusesUnverifiedFallback(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		for _, verified := range []string{"", `{"summary":""}`} {
			if verified != "" {
				f.verify(t, "beta", verified)
			}
			alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Second, result: json.RawMessage(`{}`)}
			beta := &fakeProvider{name: "beta", clock: f.clock, delay: time.Second, result: json.RawMessage(goodB)}
			r := f.newRunner(alpha, beta)
			j := f.submit(t, "k"+verified, "alpha")
			wait := runAsync(context.Background(), r, j.ID)
			f.clock.Step(t, 2, time.Second)
			got, err := wait(t)
			if !errors.Is(err, failover.ErrNoProviderLeft) || !strings.Contains(err.Error(), "beta: not verified") {
				t.Fatalf("Run = %v, %v; want ErrNoProviderLeft naming beta", got.State, err)
			}
			if n := beta.callCount(); n != 0 {
				t.Errorf("unverified fallback called %d times", n)
			}
			if as := f.attempts(t, j.ID); !slices.Equal(states(as), []string{"alpha=failed"}) {
				t.Errorf("attempts %v", states(as))
			}
			// Directly, too.
			if _, err := f.m.StartAttempt(context.Background(), j.ID, "beta"); !errors.Is(err, jobs.ErrProviderUnverified) {
				t.Errorf("StartAttempt on unverified fallback = %v", err)
			}
		}
		f.checkInvariants(t)
	})
}

// A definitive refusal fails the attempt and moves on; the next Run skips
// providers that already failed the job.
func TestRunnerDefinitiveErrorMovesOn(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Second, err: failover.Definitive(errors.New("HTTP 400: prompt rejected"))}
		beta := &fakeProvider{name: "beta", clock: f.clock, delay: time.Second, err: failover.Definitive(errors.New("HTTP 429: quota"))}
		r := f.newRunner(alpha, beta)
		j := f.submit(t, "k", "alpha")
		wait := runAsync(context.Background(), r, j.ID)
		f.clock.Step(t, 2, time.Second)
		f.clock.Step(t, 2, time.Second)
		_, err := wait(t)
		if !errors.Is(err, failover.ErrNoProviderLeft) || !strings.Contains(err.Error(), "quota") {
			t.Fatalf("Run = %v", err)
		}
		as := f.attempts(t, j.ID)
		if !slices.Equal(states(as), []string{"alpha=failed", "beta=failed"}) || !strings.Contains(as[0].Reason, "prompt rejected") {
			t.Fatalf("attempts %v (%q)", states(as), as[0].Reason)
		}
		// Nothing is eligible any more: a second Run starts nothing.
		if _, err := r.Run(context.Background(), j.ID); !errors.Is(err, failover.ErrNoProviderLeft) {
			t.Errorf("second Run = %v", err)
		}
		if n := len(f.attempts(t, j.ID)); n != 2 {
			t.Errorf("%d attempts after the second Run", n)
		}
		if _, err := f.m.FailJob(context.Background(), j.ID, "no provider could do it"); err != nil {
			t.Errorf("FailJob: %v", err)
		}
		f.checkInvariants(t)
	})
}

// An attempt past its deadline becomes unknown, not failed; the runner
// starts nothing else, nor does a second Run, until a reconciler resolves it.
func TestRunnerTimeoutLeavesUnknownUntilReconciled(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Hour, result: json.RawMessage(goodA)}
		beta := &fakeProvider{name: "beta", clock: f.clock, delay: time.Second, result: json.RawMessage(goodB)}
		r := f.newRunner(alpha, beta)
		r.AttemptTimeout = 30 * time.Second
		j := f.submit(t, "k", "alpha")
		ctx := context.Background()

		wait := runAsync(ctx, r, j.ID)
		f.clock.Step(t, 2, 30*time.Second)
		_, err := wait(t)
		var inFlight *jobs.AttemptInFlightError
		if !errors.As(err, &inFlight) || inFlight.State != jobs.AttemptUnknown {
			t.Fatalf("Run = %v, want ErrAttemptInFlight naming an unknown attempt", err)
		}
		as := f.attempts(t, j.ID)
		if !slices.Equal(states(as), []string{"alpha=unknown"}) || inFlight.AttemptID != as[0].ID {
			t.Fatalf("attempts %v", states(as))
		}
		if !errors.Is(alpha.ctxErrs[0], context.Canceled) {
			t.Errorf("the timed-out call's context: %v", alpha.ctxErrs)
		}
		// Nobody starts another attempt: not a second Run, not a direct call.
		if _, err := r.Run(ctx, j.ID); !errors.Is(err, jobs.ErrAttemptInFlight) {
			t.Errorf("second Run = %v", err)
		}
		if _, err := f.m.StartAttempt(ctx, j.ID, "beta", jobs.Hedge()); !errors.Is(err, jobs.ErrAttemptInFlight) {
			t.Errorf("StartAttempt past an unknown attempt = %v", err)
		}
		if n := beta.callCount(); n != 0 || len(f.attempts(t, j.ID)) != 1 {
			t.Errorf("fallback called %d times", n)
		}

		// The reconciler asks alpha, which did finish the work after all.
		alpha.setOutcome(as[0].ProviderRef, failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)})
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, RecheckAfter: time.Second}
		if rep, err := rec.ReconcileOnce(ctx); err != nil || len(rep.Resolved) != 0 || rep.Examined != 0 {
			t.Fatalf("reconciled too early: %+v, %v", rep, err)
		}
		f.clock.Advance(2 * time.Second)
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil || len(rep.Errors) != 0 || len(rep.Resolved) != 1 || rep.Resolved[0].To != jobs.AttemptSucceeded || rep.Resolved[0].From != jobs.AttemptUnknown {
			t.Fatalf("ReconcileOnce = %+v, %v", rep, err)
		}
		got, err := r.Run(ctx, j.ID)
		if err != nil || got.State != jobs.JobSucceeded || string(got.Result) != goodA {
			t.Errorf("after reconciling: %s %s, %v", got.State, got.Result, err)
		}
		if f.ev.Count(failover.EventAttemptReconciled) != 1 {
			t.Errorf("%d reconciled events", f.ev.Count(failover.EventAttemptReconciled))
		}
		f.checkInvariants(t)
	})
}

// Cancelling the caller's context cancels the provider calls in flight and
// leaves their attempts unknown.
func TestRunnerCallerCancelCancelsCalls(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Hour, result: json.RawMessage(goodA)}
		r := f.newRunner(alpha, nil)
		r.Fallbacks = nil
		j := f.submit(t, "k", "alpha")
		ctx, cancel := context.WithCancel(context.Background())
		wait := runAsync(ctx, r, j.ID)
		f.clock.WaitTimers(t, 2)
		cancel()
		_, err := wait(t)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if len(alpha.ctxErrs) != 1 || !errors.Is(alpha.ctxErrs[0], context.Canceled) {
			t.Errorf("provider saw %v", alpha.ctxErrs)
		}
		as := f.attempts(t, j.ID)
		if !slices.Equal(states(as), []string{"alpha=unknown"}) || !strings.Contains(as[0].Reason, "cancel") {
			t.Errorf("attempts %v (%q)", states(as), as[0].Reason)
		}
		f.clock.WaitTimers(t, 0) // every timer stopped
		f.checkInvariants(t)
	})
}

// With AbandonLosers the runner returns as soon as a result wins and
// records the loser as cancelled.
func TestRunnerAbandonLosers(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: 30 * time.Second, result: json.RawMessage(goodA)}
		beta := &fakeProvider{name: "beta", clock: f.clock, delay: 5 * time.Second, result: json.RawMessage(goodB)}
		r := f.newRunner(alpha, beta)
		r.HedgeAfter = 10 * time.Second
		r.AbandonLosers = true
		j := f.submit(t, "k", "alpha")
		wait := runAsync(context.Background(), r, j.ID)
		f.clock.Step(t, 3, 10*time.Second)
		f.clock.Step(t, 4, 5*time.Second)
		got, err := wait(t)
		if err != nil || string(got.Result) != goodB {
			t.Fatalf("Run = %s, %v", got.Result, err)
		}
		as := f.attempts(t, j.ID)
		if !slices.Equal(states(as), []string{"alpha=cancelled", "beta=succeeded"}) || !strings.Contains(as[0].Reason, as[1].ID) {
			t.Errorf("attempts %v (%q)", states(as), as[0].Reason)
		}
		f.clock.WaitTimers(t, 0)
		f.checkInvariants(t)
	})
}

// The primary times out while its hedge has not been acknowledged yet: at
// most one attempt may be in doubt, so the primary cannot become unknown
// until the hedge moves on. Whatever is left open, a reconciler resolves.
func TestRunnerTimeoutWhileHedgeStarting(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		f.verify(t, "beta", goodB)
		alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Hour, result: json.RawMessage(goodA)}
		beta := &fakeProvider{name: "beta", clock: f.clock, delay: time.Hour, noAck: true, result: json.RawMessage(goodB)}
		r := f.newRunner(alpha, beta)
		r.HedgeAfter = 10 * time.Second
		r.AttemptTimeout = 30 * time.Second
		j := f.submit(t, "k", "alpha")
		ctx := context.Background()

		wait := runAsync(ctx, r, j.ID)
		f.clock.Step(t, 3, 10*time.Second) // t=10: hedge on beta, which never acknowledges
		f.clock.Step(t, 4, 20*time.Second) // t=30: alpha's deadline, while beta is starting
		f.clock.Step(t, 2, 10*time.Second) // t=40: beta's deadline
		_, err := wait(t)
		var inFlight *jobs.AttemptInFlightError
		if !errors.As(err, &inFlight) {
			t.Fatalf("Run = %v, want ErrAttemptInFlight", err)
		}
		as := f.attempts(t, j.ID)
		if !slices.Equal(states(as), []string{"alpha=running", "beta=unknown"}) {
			t.Fatalf("attempts %v", states(as))
		}
		if inFlight.AttemptID != as[1].ID || inFlight.State != jobs.AttemptUnknown {
			t.Errorf("Run names %s (%s), want beta's unknown attempt", inFlight.AttemptID, inFlight.State)
		}
		f.checkInvariants(t)

		alpha.setOutcome(as[0].ProviderRef, failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)})
		beta.setOutcome(as[1].ProviderKey(), failover.Outcome{State: failover.OutcomeNotFound}) // never acknowledged: asked by key
		rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, StaleAfter: time.Minute}
		f.clock.Advance(2 * time.Minute)
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil || len(rep.Resolved) != 2 || len(rep.Errors) != 0 {
			t.Fatalf("ReconcileOnce = %+v, %v", rep, err)
		}
		if as := f.attempts(t, j.ID); !slices.Equal(states(as), []string{"alpha=succeeded", "beta=cancelled"}) {
			t.Errorf("after reconciling: %v", states(as))
		}
		f.checkInvariants(t)
	})
}

// A won attempt is routine: the Runner logs it at debug level, so that a
// service logging at info does not print a line for every job.
func TestRunnerLogsRoutineSuccessAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{{slog.LevelInfo, false}, {slog.LevelDebug, true}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, testdb.StoreCases()[0])
			alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Second, result: json.RawMessage(goodA)}
			var logs syncBuffer
			r := f.newRunner(alpha, nil)
			r.Fallbacks = nil
			r.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
			j := f.submit(t, "k", "alpha")
			wait := runAsync(context.Background(), r, j.ID)
			f.clock.Step(t, 2, time.Second) // the provider's delay and the attempt's deadline
			if got, err := wait(t); err != nil || got.State != jobs.JobSucceeded {
				t.Fatalf("Run = %s, %v", got.State, err)
			}
			if got := strings.Contains(logs.String(), "attempt won"); got != tc.want {
				t.Errorf("at level %s the log has the won attempt: %v, want %v\n%s", tc.level, got, tc.want, logs.String())
			}
		})
	}
}

// nested returns a number inside depth arrays: [[…[1]…]].
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// unstorableResults are results that encoding/json's Valid accepts, or that
// one of the databases would refuse or store as something else: Complete
// refuses each before anything is written (see the tests of package jobs).
var unstorableResults = []struct{ name, result string }{
	{"invalid UTF-8 in a string", "{\"summary\":\"\xff\"}"},
	{"invalid UTF-8 in a key", "{\"summary\":\"x\",\"\xc3\":1}"},
	{"truncated UTF-8 sequence", "{\"summary\":\"caf\xc3\"}"},
	{"UTF-8 encoded surrogate", "{\"summary\":\"\xed\xa0\x80\"}"},
	{"lone surrogate escape", `{"summary":"\ud800"}`},
	{"raw NUL in a string", "{\"summary\":\"a\x00b\"}"},
	{"raw NUL after the value", "{\"summary\":\"x\"}\x00"},
	{"nested past the limit of 128", `{"summary":"x","deep":` + nested(128) + `}`},
	{"nested past SQLite's JSON limit", `{"summary":"x","deep":` + nested(1500) + `}`},
	{"duplicate key", `{"summary":"x","summary":"y"}`},
	{"two values", `{"summary":"x"} {"summary":"y"}`},
	{"not JSON", `<html>OK</html>`},
	{"over MaxResultBytes", `{"summary":"` + strings.Repeat("x", 5000) + `"}`},
}

// A provider that answers with a result no database can hold as it is
// (but that its kind's contract, reading it with encoding/json, would
// pass) leaves its attempt failed with the reason, not running and not
// succeeded: the job stays open, and giving up on it is allowed.
func TestRunnerFailsAttemptWithUnstorableResult(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		opts := f.opts
		opts.MaxResultBytes = 4096
		f.m = jobstest.NewManager(t, f.store, opts)
		for _, tt := range unstorableResults {
			alpha := &fakeProvider{name: "alpha", clock: f.clock, delay: time.Second, result: json.RawMessage(tt.result)}
			r := &failover.Runner{Manager: f.m, Providers: map[string]failover.Provider{"alpha": alpha}, AttemptTimeout: time.Minute}
			j := f.submit(t, "k-"+tt.name, "alpha")
			wait := runAsync(context.Background(), r, j.ID)
			f.clock.Step(t, 2, time.Second) // alpha's deadline and delay
			got, err := wait(t)
			if !errors.Is(err, failover.ErrNoProviderLeft) {
				t.Errorf("%s: Run: %v (job %s); want ErrNoProviderLeft", tt.name, err, got.State)
			}
			as := f.attempts(t, j.ID)
			if len(as) != 1 || as[0].State != jobs.AttemptFailed || !strings.HasPrefix(as[0].Reason, "unusable result: ") {
				t.Fatalf("%s: attempts %v (%+v); want alpha failed with an unusable result", tt.name, states(as), as)
			}
			stored, err := f.m.Get(context.Background(), j.ID)
			if err != nil || stored.State != jobs.JobRunning || stored.Result != nil {
				t.Fatalf("%s: job %s with result %q (%v); want it open without a result", tt.name, stored.State, stored.Result, err)
			}
			if _, err := f.m.FailJob(context.Background(), j.ID, "no usable result"); err != nil {
				t.Errorf("%s: FailJob: %v", tt.name, err)
			}
		}
		f.checkInvariants(t)
	})
}
