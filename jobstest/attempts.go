package jobstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// The cases of an attempt's life before it finishes: when StartAttempt
// may start one (and the races for it), an attempt in doubt blocking the
// job, every transition from every state, and the provider's reference.

func testStartAttemptRules(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	type setupFn func(j jobs.Job) (blocker string)
	for _, tc := range []struct {
		name    string
		prepare setupFn
		hedge   bool
		wantErr error
	}{
		{"pending job", func(jobs.Job) string { return "" }, false, nil},
		{"after a failed attempt", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Fail(e.ctx, a.ID, "declined")
			return ""
		}, false, nil},
		{"after a cancelled attempt", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Cancel(e.ctx, a.ID, "never sent")
			return ""
		}, false, nil},
		{"past starting", func(j jobs.Job) string { return e.start(j.ID, "").ID }, false, jobs.ErrAttemptInFlight},
		{"hedge past starting", func(j jobs.Job) string { return e.start(j.ID, "").ID }, true, jobs.ErrAttemptInFlight},
		{"past running", func(j jobs.Job) string { return e.running(j.ID).ID }, false, jobs.ErrAttemptInFlight},
		{"hedge past running", func(j jobs.Job) string { e.running(j.ID); return "" }, true, nil},
		{"past unknown", func(j jobs.Job) string {
			a := e.running(j.ID)
			e.m.MarkUnknown(e.ctx, a.ID, "timeout")
			return a.ID
		}, false, jobs.ErrAttemptInFlight},
		{"hedge past unknown", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.MarkUnknown(e.ctx, a.ID, "timeout")
			return a.ID
		}, true, jobs.ErrAttemptInFlight},
		{"succeeded job", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"ok":true}`))
			return ""
		}, true, jobs.ErrJobClosed},
		{"failed job", func(j jobs.Job) string { e.m.FailJob(e.ctx, j.ID, "gave up"); return "" }, false, jobs.ErrJobClosed},
		{"cancelled job", func(j jobs.Job) string { e.m.CancelJob(e.ctx, j.ID, "stop"); return "" }, false, jobs.ErrJobClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			blocker := tc.prepare(j)
			before := e.attempts(j.ID)
			var opts []jobs.AttemptOption
			if tc.hedge {
				opts = append(opts, jobs.Hedge())
			}
			a, err := e.m.StartAttempt(e.ctx, j.ID, "", opts...)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("StartAttempt = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if blocker != "" {
					var inflight *jobs.AttemptInFlightError
					if !errors.As(err, &inflight) || inflight.AttemptID != blocker || inflight.JobID != j.ID {
						t.Errorf("error %v does not name the blocking attempt %s", err, blocker)
					}
				}
				if diff := cmp.Diff(before, e.attempts(j.ID)); diff != "" {
					t.Errorf("a refused StartAttempt wrote (-before +after):\n%s", diff)
				}
				return
			}
			cur := e.job(j.ID)
			if a.State != jobs.AttemptStarting || a.JobID != j.ID || a.Seq != len(before)+1 ||
				a.BaseVersion != cur.Version || a.Provider != j.Provider || a.Hedge != tc.hedge {
				t.Errorf("attempt = %+v; want starting, seq %d, base version %d, provider %s", a, len(before)+1, cur.Version, j.Provider)
			}
			if cur.State != jobs.JobRunning || cur.Attempts != len(before)+1 {
				t.Errorf("job state %s with %d attempts, want running with %d", cur.State, cur.Attempts, len(before)+1)
			}
		})
	}
	e.checkInvariants()
}

func testStartAttemptRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, hedge := range []bool{false, true} {
		t.Run(fmt.Sprintf("hedge=%v", hedge), func(t *testing.T) {
			e := e.with(t)
			j := e.newJob()
			if hedge {
				e.running(j.ID) // hedges may pass a running attempt, but only one at a time may start
			}
			const n = 32
			errs := make([]error, n)
			ids := make([]string, n)
			release(n, func(i int) {
				var opts []jobs.AttemptOption
				if hedge {
					opts = append(opts, jobs.Hedge())
				}
				a, err := e.m.StartAttempt(e.ctx, j.ID, "", opts...)
				ids[i], errs[i] = a.ID, err
			})
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, jobs.ErrAttemptInFlight):
					t.Errorf("StartAttempt %d: %v, want nil or ErrAttemptInFlight", i, err)
				}
			}
			want := 1
			if hedge {
				want = 2 // the running one and the single new one
			}
			if won != 1 {
				t.Errorf("%d of %d concurrent StartAttempts succeeded, want exactly 1", won, n)
			}
			if got := len(e.attempts(j.ID)); got != want {
				t.Errorf("job has %d attempts, want %d", got, want)
			}
		})
	}
	e.checkInvariants()
}

func testTimeoutBlocks(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name    string
		resolve func(a jobs.Attempt) error
		after   error // what StartAttempt returns once resolved
	}{
		{"completed", func(a jobs.Attempt) error {
			_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"late":"but fine"}`))
			return err
		}, jobs.ErrJobClosed},
		{"failed", func(a jobs.Attempt) error { _, err := e.m.Fail(e.ctx, a.ID, "provider says no"); return err }, nil},
		{"cancelled", func(a jobs.Attempt) error { _, err := e.m.Cancel(e.ctx, a.ID, "never arrived"); return err }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			a := e.running(j.ID)
			u, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer after 30s")
			if err != nil || u.State != jobs.AttemptUnknown || u.Reason != "no answer after 30s" || u.ProviderRef != a.ProviderRef {
				t.Fatalf("MarkUnknown = %+v, %v", u, err)
			}
			for _, hedge := range []bool{false, true} {
				opts := []jobs.AttemptOption{}
				if hedge {
					opts = append(opts, jobs.Hedge())
				}
				_, err = e.m.StartAttempt(e.ctx, j.ID, "", opts...)
				var inflight *jobs.AttemptInFlightError
				if !errors.As(err, &inflight) || inflight.AttemptID != a.ID || inflight.State != jobs.AttemptUnknown {
					t.Fatalf("StartAttempt(hedge=%v) while unknown = %v, want ErrAttemptInFlight naming %s", hedge, err, a.ID)
				}
			}
			if _, err := e.m.FailJob(e.ctx, j.ID, "give up"); !errors.Is(err, jobs.ErrAttemptInFlight) {
				t.Fatalf("FailJob while unknown = %v, want ErrAttemptInFlight", err)
			}
			if err := tc.resolve(a); err != nil {
				t.Fatalf("resolving the unknown attempt: %v", err)
			}
			_, err = e.m.StartAttempt(e.ctx, j.ID, "")
			if !errors.Is(err, tc.after) || (tc.after == nil) != (err == nil) {
				t.Fatalf("StartAttempt after resolution = %v, want %v", err, tc.after)
			}
		})
	}
	e.checkInvariants()
}

func testOneInDoubt(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	a := e.running(j.ID)
	h := e.start(j.ID, "", jobs.Hedge()) // starting: in doubt
	_, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout")
	var inflight *jobs.AttemptInFlightError
	if !errors.As(err, &inflight) || inflight.AttemptID != h.ID {
		t.Fatalf("MarkUnknown while a hedge is starting = %v, want ErrAttemptInFlight naming %s", err, h.ID)
	}
	if got := e.attempt(a.ID); got.State != jobs.AttemptRunning {
		t.Fatalf("attempt = %s, want still running", got.State)
	}
	if _, err := e.m.MarkRunning(e.ctx, h.ID, "ref-h"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout"); err != nil {
		t.Fatalf("MarkUnknown once the hedge runs = %v", err)
	}
	e.checkInvariants()
}

// testMarkUnknownRacesHedge releases, on many jobs, callers of MarkUnknown
// on a running attempt together with the one call that moves its hedge out
// of starting. A MarkUnknown refused because the hedge was in doubt may find
// it gone a moment later: it must then try again (or name the hedge while it
// is still in doubt), and never answer with anything but this package's
// errors.
func testMarkUnknownRacesHedge(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name   string
		settle func(e *env, hedge jobs.Attempt) error
	}{
		{"hedge acknowledged", func(e *env, h jobs.Attempt) error { _, err := e.m.MarkRunning(e.ctx, h.ID, "ref-h"); return err }},
		{"hedge failed", func(e *env, h jobs.Attempt) error { _, err := e.m.Fail(e.ctx, h.ID, "declined"); return err }},
		{"hedge cancelled", func(e *env, h jobs.Attempt) error { _, err := e.m.Cancel(e.ctx, h.ID, "stopped"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			rounds, callers := size(24, 4), 8
			for range rounds {
				j := e.newJob()
				a := e.running(j.ID)
				h := e.start(j.ID, "", jobs.Hedge())
				errs := make([]error, callers+1)
				release(callers+1, func(i int) {
					if i == callers {
						errs[i] = tc.settle(e, h)
						return
					}
					_, errs[i] = e.m.MarkUnknown(e.ctx, a.ID, "no answer")
				})
				if errs[callers] != nil {
					t.Fatalf("settling the hedge: %v", errs[callers])
				}
				for _, err := range errs[:callers] {
					var inflight *jobs.AttemptInFlightError
					switch {
					case err == nil:
					case errors.As(err, &inflight):
						if inflight.AttemptID != h.ID || inflight.State != jobs.AttemptStarting {
							t.Errorf("MarkUnknown refused naming %s (%s), want the starting hedge %s", inflight.AttemptID, inflight.State, h.ID)
						}
					default:
						t.Errorf("MarkUnknown racing the hedge = %v (%T), want nil or ErrAttemptInFlight", err, err)
					}
				}
				// The hedge has moved on: nothing blocks the move any more.
				if got, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer"); err != nil || got.State != jobs.AttemptUnknown {
					t.Fatalf("MarkUnknown once the hedge settled = %s, %v", got.State, err)
				}
			}
		})
	}
	e.checkInvariants()
}

// transition verbs, applied to an attempt in a given state.
type verb struct {
	name string
	to   jobs.AttemptState
	call func(e *env, a jobs.Attempt) error
}

var verbs = []verb{
	{"MarkRunning", jobs.AttemptRunning, func(e *env, a jobs.Attempt) error {
		ref := a.ProviderRef
		if ref == "" {
			ref = "ref-" + a.ID
		}
		_, err := e.m.MarkRunning(e.ctx, a.ID, ref)
		return err
	}},
	{"MarkRunning with another reference", jobs.AttemptRunning, func(e *env, a jobs.Attempt) error {
		_, err := e.m.MarkRunning(e.ctx, a.ID, "other-ref")
		return err
	}},
	{"MarkUnknown", jobs.AttemptUnknown, func(e *env, a jobs.Attempt) error {
		_, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout")
		return err
	}},
	{"Complete", jobs.AttemptSucceeded, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"ok":true}`))
		return err
	}},
	{"Fail", jobs.AttemptFailed, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Fail(e.ctx, a.ID, "declined")
		return err
	}},
	{"Cancel", jobs.AttemptCancelled, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Cancel(e.ctx, a.ID, "stopped")
		return err
	}},
}

func testAttemptTransitions(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	states := []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown,
		jobs.AttemptSucceeded, jobs.AttemptLost, jobs.AttemptFailed, jobs.AttemptCancelled}
	for _, from := range states {
		for _, v := range verbs {
			// What the verb must do from this state: move (legal edge), nothing
			// (already there: a repeat), or refuse.
			legal := from.CanMoveTo(v.to) && !(v.name == "MarkRunning with another reference" && from == jobs.AttemptRunning)
			repeat := from == v.to && v.name != "MarkRunning with another reference"
			// An unknown attempt (without a reference here) learns one and
			// stays unknown.
			learns := from == jobs.AttemptUnknown && v.to == jobs.AttemptRunning
			var want error
			switch {
			case legal, repeat, learns:
				want = nil
			case from == jobs.AttemptLost && v.name == "Complete":
				want = jobs.ErrLostRace // a repeated Complete by the loser gets the same answer
			default:
				want = jobs.ErrInvalidTransition
			}
			t.Run(fmt.Sprintf("%s/%s", from, v.name), func(t *testing.T) {
				e := e.with(t)
				a := e.attemptIn(from)
				beforeJob := e.job(a.JobID)
				err := v.call(e, a)
				if !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Fatalf("%s from %s = %v, want %v", v.name, from, err, want)
				}
				after := e.attempt(a.ID)
				afterJob := e.job(a.JobID)
				if learns {
					if after.State != jobs.AttemptUnknown || after.ProviderRef == "" || after.Reason != a.Reason {
						t.Errorf("attempt is %s with reference %q and reason %q after %s, want unknown with it and %q",
							after.State, after.ProviderRef, after.Reason, v.name, a.Reason)
					}
					if diff := cmp.Diff(beforeJob, afterJob); diff != "" {
						t.Errorf("%s changed the job (-before +after):\n%s", v.name, diff)
					}
					return
				}
				if legal {
					if after.State != v.to {
						t.Errorf("attempt is %s after %s, want %s", after.State, v.name, v.to)
					}
					if v.to.Terminal() == after.FinishedAt.IsZero() {
						t.Errorf("finished at %v with state %s", after.FinishedAt, after.State)
					}
					return
				}
				if diff := cmp.Diff(a, after); diff != "" {
					t.Errorf("refused or repeated %s changed the attempt (-before +after):\n%s", v.name, diff)
				}
				if diff := cmp.Diff(beforeJob, afterJob); diff != "" {
					t.Errorf("refused or repeated %s changed the job (-before +after):\n%s", v.name, diff)
				}
				var te *jobs.TransitionError
				if want == jobs.ErrInvalidTransition && (!errors.As(err, &te) || te.From != from || te.AttemptID != a.ID) {
					t.Errorf("error %v does not report the attempt's state %s", err, from)
				}
			})
		}
	}
	e.checkInvariants()
}

// testUnknownLearnsReference: an acknowledgement that arrives after the
// attempt became unknown records the provider's reference, once; the
// attempt stays unknown, and still blocks the job.
func testUnknownLearnsReference(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	ev := &events{}
	e := setup(t, newStore, func(o *jobs.Options) { o.Observer = ev })
	unknown := func(e *env, ref string) jobs.Attempt {
		e.t.Helper()
		a := e.start(e.newJob().ID, "")
		if ref != "" {
			if _, err := e.m.MarkRunning(e.ctx, a.ID, ref); err != nil {
				e.t.Fatalf("MarkRunning: %v", err)
			}
		}
		if _, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer after 30s"); err != nil {
			e.t.Fatalf("MarkUnknown: %v", err)
		}
		return e.attempt(a.ID)
	}
	for _, tc := range []struct {
		name    string
		given   func(e *env) jobs.Attempt
		ref     string
		wantErr error
		wantRef string
		learns  bool // the reference is recorded by this call
	}{
		{"without a reference, learns it", func(e *env) jobs.Attempt { return unknown(e, "") }, "ref-late", nil, "ref-late", true},
		{"the learned reference again", func(e *env) jobs.Attempt {
			a := unknown(e, "")
			if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-late"); err != nil {
				e.t.Fatal(err)
			}
			return e.attempt(a.ID)
		}, "ref-late", nil, "ref-late", false},
		{"another than the learned reference", func(e *env) jobs.Attempt {
			a := unknown(e, "")
			if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-late"); err != nil {
				e.t.Fatal(err)
			}
			return e.attempt(a.ID)
		}, "ref-other", jobs.ErrInvalidTransition, "ref-late", false},
		{"the reference recorded at running again", func(e *env) jobs.Attempt { return unknown(e, "ref-1") }, "ref-1", nil, "ref-1", false},
		{"another than the reference recorded at running", func(e *env) jobs.Attempt { return unknown(e, "ref-1") }, "ref-2", jobs.ErrInvalidTransition, "ref-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			a := tc.given(e)
			beforeJob := e.job(a.JobID)
			before := ev.count(jobs.EventReferenceRecorded, a.ID)
			e.clock.Advance(time.Second)
			got, err := e.m.MarkRunning(e.ctx, a.ID, tc.ref)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("MarkRunning(%q) on an unknown attempt = %v, want %v", tc.ref, err, tc.wantErr)
			}
			var te *jobs.TransitionError
			if tc.wantErr != nil && (!errors.As(err, &te) || te.AttemptID != a.ID || te.From != jobs.AttemptUnknown || te.To != jobs.AttemptRunning || te.Detail == "") {
				t.Errorf("error %#v does not say that another reference is recorded", err)
			}
			after := e.attempt(a.ID)
			if after.State != jobs.AttemptUnknown || after.ProviderRef != tc.wantRef || after.Reason != a.Reason || !after.FinishedAt.IsZero() {
				t.Errorf("attempt is %s, reference %q, reason %q, finished %v; want unknown, %q, %q, not finished",
					after.State, after.ProviderRef, after.Reason, after.FinishedAt, tc.wantRef, a.Reason)
			}
			if tc.learns {
				if !after.UpdatedAt.Equal(e.clock.Now()) {
					t.Errorf("updated at %v, want %v", after.UpdatedAt, e.clock.Now())
				}
				if diff := cmp.Diff(after, got); diff != "" {
					t.Errorf("returned attempt differs from stored (-stored +returned):\n%s", diff)
				}
			} else if diff := cmp.Diff(a, after); diff != "" {
				t.Errorf("a repeated or refused MarkRunning changed the attempt (-before +after):\n%s", diff)
			}
			want := 0
			if tc.learns {
				want = 1
			}
			if n := ev.count(jobs.EventReferenceRecorded, a.ID) - before; n != want {
				t.Errorf("%d %s events, want %d", n, jobs.EventReferenceRecorded, want)
			}
			if diff := cmp.Diff(beforeJob, e.job(a.JobID)); diff != "" {
				t.Errorf("MarkRunning changed the job (-before +after):\n%s", diff)
			}
			// Still in doubt: no new attempt, not even a hedge.
			var inflight *jobs.AttemptInFlightError
			if _, err := e.m.StartAttempt(e.ctx, a.JobID, "", jobs.Hedge()); !errors.As(err, &inflight) || inflight.AttemptID != a.ID {
				t.Errorf("StartAttempt past the unknown attempt = %v, want ErrAttemptInFlight naming it", err)
			}
		})
	}
	e.checkInvariants()
}

// testReferenceRace releases acknowledgements with different references
// together, on a starting and on an unknown attempt: exactly one reference
// is recorded, and every other call is refused.
func testReferenceRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		from, to jobs.AttemptState
	}{
		{jobs.AttemptStarting, jobs.AttemptRunning},
		{jobs.AttemptUnknown, jobs.AttemptUnknown},
	} {
		t.Run(string(tc.from), func(t *testing.T) {
			e := e.with(t)
			a := e.start(e.newJob().ID, "")
			if tc.from == jobs.AttemptUnknown {
				if _, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout"); err != nil {
					t.Fatal(err)
				}
			}
			const n = 32
			errs := make([]error, n)
			release(n, func(i int) {
				_, errs[i] = e.m.MarkRunning(e.ctx, a.ID, fmt.Sprintf("ref-%d", i))
			})
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner < 0:
					winner = i
				case err == nil:
					t.Errorf("references %d and %d were both accepted", winner, i)
				case !errors.Is(err, jobs.ErrInvalidTransition):
					t.Errorf("MarkRunning %d = %v, want nil or ErrInvalidTransition", i, err)
				}
			}
			after := e.attempt(a.ID)
			if winner < 0 || after.State != tc.to || after.ProviderRef != fmt.Sprintf("ref-%d", winner) {
				t.Errorf("attempt is %s with reference %q; accepted call %d, want %s with its reference", after.State, after.ProviderRef, winner, tc.to)
			}
		})
	}
	e.checkInvariants()
}
