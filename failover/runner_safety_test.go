package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// scriptedProvider hands each call to the test, which acknowledges it,
// watches its context and answers it when it chooses: that is how a test
// reaches the exact windows between an acknowledgement, a deadline, a
// cancel and a result. Lookup and the call count come from fakeProvider.
type scriptedProvider struct {
	*fakeProvider
	handed chan *scriptedCall
}

// scriptedCall is one call in progress, as the provider sees it.
type scriptedCall struct {
	ctx     context.Context
	attempt jobs.Attempt
	ack     func(ref string) error
	reply   chan callReply
	endErr  error // ctx.Err() when the call returned; read it once Run has returned
}

type callReply struct {
	result json.RawMessage
	err    error
}

func newScripted(name string, clock jobs.Clock) *scriptedProvider {
	return &scriptedProvider{fakeProvider: &fakeProvider{name: name, clock: clock}, handed: make(chan *scriptedCall, 4)}
}

func (p *scriptedProvider) Call(ctx context.Context, _ jobs.Job, a jobs.Attempt, ack func(string) error) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	c := &scriptedCall{ctx: ctx, attempt: a, ack: ack, reply: make(chan callReply, 1)}
	p.handed <- c
	r := <-c.reply
	c.endErr = ctx.Err()
	return r.result, r.err
}

// next waits for the provider's next call. It fails the test after 20 s of
// real time.
func (p *scriptedProvider) next(t *testing.T) *scriptedCall {
	t.Helper()
	select {
	case c := <-p.handed:
		return c
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was not called", p.name)
		return nil
	}
}

// answer makes the call return.
func (c *scriptedCall) answer(result string, err error) {
	var r json.RawMessage
	if result != "" || err == nil {
		r = json.RawMessage(result)
	}
	c.reply <- callReply{r, err}
}

// acknowledge passes the provider's reference to the runner, as a provider
// does once it has accepted the request.
func (c *scriptedCall) acknowledge(t *testing.T, ref string) {
	t.Helper()
	if err := c.ack(ref); err != nil {
		t.Errorf("ack(%q) = %v", ref, err)
	}
}

// hooks runs functions on a Manager's events, synchronously, on the
// goroutine that caused them and before the call that emitted them
// returns: a test uses them to act in the middle of a Runner's step.
type hooks struct {
	mu sync.Mutex
	on map[jobs.EventType][]func(jobs.Event)
}

func (h *hooks) add(typ jobs.EventType, fn func(jobs.Event)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.on == nil {
		h.on = map[jobs.EventType][]func(jobs.Event){}
	}
	h.on[typ] = append(h.on[typ], fn)
}

func (h *hooks) Observe(_ context.Context, e jobs.Event) {
	h.mu.Lock()
	fns := slices.Clone(h.on[e.Type])
	h.mu.Unlock()
	for _, fn := range fns {
		fn(e)
	}
}

// signal returns a channel closed at the first event of type typ for the
// attempt whose ID attemptID returns (empty: not known yet).
func (h *hooks) signal(typ jobs.EventType, attemptID func() string) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	h.add(typ, func(e jobs.Event) {
		if id := attemptID(); id != "" && e.AttemptID == id {
			once.Do(func() { close(ch) })
		}
	})
	return ch
}

// withHooks makes f.m report its events to h as well (not the managers of
// managerOn, which stand for other workers).
func (f *fixture) withHooks() *hooks {
	h := &hooks{}
	opts := f.opts
	opts.Observer = jobs.ObserverFunc(func(ctx context.Context, e jobs.Event) {
		f.ev.Observe(ctx, e)
		h.Observe(ctx, e)
	})
	m, err := jobs.New(f.store, opts)
	if err != nil {
		panic(err) // f.opts passed New already
	}
	f.m = m
	return h
}

// runnerOver returns a runner over the given providers with f's clock, a
// minute per attempt, and fallbacks in order.
func (f *fixture) runnerOver(providers map[string]failover.Provider, fallbacks ...string) *failover.Runner {
	return &failover.Runner{Manager: f.m, Providers: providers, Fallbacks: fallbacks, AttemptTimeout: time.Minute}
}

// startRefusingStore is a store whose CreateAttempt fails with a storage
// error once refuse is set, as it would once the database went away.
type startRefusingStore struct {
	jobs.SQLStore
	refuse atomic.Bool
}

func (s *startRefusingStore) CreateAttempt(ctx context.Context, na jobs.NewAttempt) (jobs.Attempt, error) {
	if s.refuse.Load() {
		return jobs.Attempt{}, &jobs.StorageError{Op: "start attempt", Kind: jobs.StorageUnavailable, Message: "connection refused"}
	}
	return s.SQLStore.CreateAttempt(ctx, na)
}

// waitFor waits for ch to close. It fails the test after 20 s of real time.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("waiting for %s", what)
	}
}

// An acknowledgement that comes while the Runner gives up on the call (the
// caller cancelled, or the deadline passed) still records the provider's
// reference: the attempt becomes unknown with it, and a reconciler can ask
// the provider about it.
func TestRunnerRecordsAcknowledgementThatArrivesAsTheCallEnds(t *testing.T) {
	tests := []struct {
		name string
		// end ends the call from the Runner's side and returns once the
		// provider's context is done and the acknowledgement may come.
		end     func(t *testing.T, f *fixture, c *scriptedCall, cancel context.CancelFunc, unknown <-chan struct{})
		wantErr error
		reason  string
	}{
		{"the caller cancels first", func(t *testing.T, f *fixture, c *scriptedCall, cancel context.CancelFunc, _ <-chan struct{}) {
			cancel()
			<-c.ctx.Done()
		}, context.Canceled, "caller cancelled"},
		{"the deadline passes first, and the attempt is unknown", func(t *testing.T, f *fixture, c *scriptedCall, _ context.CancelFunc, unknown <-chan struct{}) {
			f.clock.Step(t, 1, time.Minute) // the attempt's deadline
			<-c.ctx.Done()
			waitFor(t, unknown, "the attempt to be marked unknown")
		}, jobs.ErrAttemptInFlight, "no result within"},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFixture(t, sc)
				h := f.withHooks()
				alpha := newScripted("alpha", f.clock)
				r := f.runnerOver(map[string]failover.Provider{"alpha": alpha})
				j := f.submit(t, "k", "alpha")
				var attemptID atomic.Value
				attemptID.Store("")
				unknown := h.signal(jobs.EventAttemptUnknown, func() string { return attemptID.Load().(string) })
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()

				wait := runAsync(ctx, r, j.ID)
				c := alpha.next(t)
				attemptID.Store(c.attempt.ID)
				tt.end(t, f, c, cancel, unknown)
				c.acknowledge(t, "alpha-ref") // the provider hands over its reference, late
				c.answer("", c.ctx.Err())
				if _, err := wait(t); !errors.Is(err, tt.wantErr) {
					t.Fatalf("Run = %v, want %v", err, tt.wantErr)
				}

				as := f.attempts(t, j.ID)
				if !slices.Equal(states(as), []string{"alpha=unknown"}) || as[0].ProviderRef != "alpha-ref" || !strings.Contains(as[0].Reason, tt.reason) {
					t.Fatalf("attempts %v, reference %q, reason %q; want alpha unknown with alpha-ref (%s)", states(as), as[0].ProviderRef, as[0].Reason, tt.reason)
				}

				// The reference is what a reconciler needs: alpha did the work.
				alpha.setOutcome("alpha-ref", failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(goodA)})
				rec := &failover.Reconciler{Manager: f.m, Providers: r.Providers, RecheckAfter: time.Second, StaleAfter: time.Second}
				f.clock.Advance(2 * time.Second)
				rep, err := rec.ReconcileOnce(context.Background())
				if err != nil || len(rep.Resolved) != 1 || rep.Resolved[0].To != jobs.AttemptSucceeded {
					t.Fatalf("ReconcileOnce = %+v, %v; want the attempt completed from the provider's answer", rep, err)
				}
				if got, _ := f.m.Get(context.Background(), j.ID); got.State != jobs.JobSucceeded || string(got.Result) != goodA {
					t.Errorf("job %s with %s, want succeeded with alpha's result", got.State, got.Result)
				}
				f.checkInvariants(t)
			})
		}
	})
}

// The Runner starts the next provider only when the previous attempt
// definitively did nothing, or produced a result refused on its merits,
// and it recorded that failure itself. Whatever else ended the attempt (it
// was resolved by someone else while the call ran, another attempt won,
// the store refused the next attempt), it starts nothing more: the intent
// must not run twice.
func TestRunnerFailsOverOnlyPastAFailureItRecorded(t *testing.T) {
	definitive := failover.Definitive(errors.New("HTTP 400: prompt rejected"))
	cancelIt := func(t *testing.T, f *fixture, a jobs.Attempt) {
		if _, err := f.managerOn(f.store).Cancel(context.Background(), a.ID, "operator: stop this one"); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// meanwhile runs after alpha acknowledged and before it answers.
		meanwhile func(t *testing.T, f *fixture, a jobs.Attempt)
		// onFailed runs as the Runner records alpha's failure, before it
		// goes on to the next provider.
		onFailed func(t *testing.T, f *fixture, a jobs.Attempt)
		result   string
		err      error

		wantErr    error  // from Run
		wantStates string // the job's attempts, "provider=state" joined by spaces
		wantBeta   bool   // the fallback was called
		wantResult string // the job's result, if it succeeded
	}{
		// What allows the next provider.
		{name: "definitive error, recorded", err: definitive,
			wantStates: "alpha=failed beta=succeeded", wantBeta: true, wantResult: goodB},
		{name: "unusable result, recorded", result: "<html>OK</html>",
			wantStates: "alpha=failed beta=succeeded", wantBeta: true, wantResult: goodB},
		{name: "contract violation, recorded", result: `{"answer":"off format"}`,
			wantStates: "alpha=failed beta=succeeded", wantBeta: true, wantResult: goodB},

		// The attempt was resolved by someone else while alpha worked.
		{name: "result, after an out-of-band Cancel", meanwhile: cancelIt, result: goodA,
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=cancelled"},
		{name: "result, after a reconciler recorded a failure", result: goodA,
			meanwhile: func(t *testing.T, f *fixture, a jobs.Attempt) {
				if _, err := f.managerOn(f.store).Fail(context.Background(), a.ID, "provider reported failure"); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=failed"},
		{name: "definitive error, after an out-of-band Cancel", meanwhile: cancelIt, err: definitive,
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=cancelled"},
		{name: "unusable result, after an out-of-band Cancel", meanwhile: cancelIt, result: "<html>OK</html>",
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=cancelled"},
		{name: "contract violation, after an out-of-band Cancel", meanwhile: cancelIt, result: `{"answer":"off format"}`,
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=cancelled"},
		{name: "ambiguous error, after an out-of-band Cancel", meanwhile: cancelIt, err: errors.New("connection reset"),
			wantErr: jobs.ErrInvalidTransition, wantStates: "alpha=cancelled"},
		{name: "definitive error, after a reconciler completed the attempt", err: definitive,
			meanwhile: func(t *testing.T, f *fixture, a jobs.Attempt) {
				if _, err := f.managerOn(f.store).Complete(context.Background(), a.ID, json.RawMessage(goodA)); err != nil {
					t.Fatal(err)
				}
			},
			wantStates: "alpha=succeeded", wantResult: goodA},

		// Another attempt completed the job first: it has its winner.
		{name: "result, after another worker's attempt won", result: goodA,
			meanwhile: func(t *testing.T, f *fixture, a jobs.Attempt) {
				other := f.managerOn(f.store)
				h, err := other.StartAttempt(context.Background(), a.JobID, "alpha", jobs.Hedge())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := other.Complete(context.Background(), h.ID, json.RawMessage(`{"summary":"from the other worker"}`)); err != nil {
					t.Fatal(err)
				}
			},
			wantStates: "alpha=lost alpha=succeeded", wantResult: `{"summary":"from the other worker"}`},

		// The store refuses the next attempt.
		{name: "definitive error, then another worker's attempt is in flight", err: definitive,
			onFailed: func(t *testing.T, f *fixture, a jobs.Attempt) {
				if _, err := f.managerOn(f.store).StartAttempt(context.Background(), a.JobID, "alpha"); err != nil {
					t.Error(err)
				}
			},
			wantErr: jobs.ErrAttemptInFlight, wantStates: "alpha=failed alpha=starting"},
		{name: "definitive error, then the job is cancelled", err: definitive,
			onFailed: func(t *testing.T, f *fixture, a jobs.Attempt) {
				if _, err := f.managerOn(f.store).CancelJob(context.Background(), a.JobID, "the user gave up"); err != nil {
					t.Error(err)
				}
			},
			wantErr: jobs.ErrJobClosed, wantStates: "alpha=failed"},
		{name: "definitive error, then the store fails", err: definitive,
			onFailed: func(t *testing.T, f *fixture, a jobs.Attempt) { f.store.(*startRefusingStore).refuse.Store(true) },
			wantErr:  jobs.ErrStorage, wantStates: "alpha=failed"},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFixture(t, sc)
				f.store = &startRefusingStore{SQLStore: f.store.(jobs.SQLStore)}
				h := f.withHooks()
				f.verify(t, "beta", goodB)
				alpha := newScripted("alpha", f.clock)
				beta := &fakeProvider{name: "beta", clock: f.clock, result: json.RawMessage(goodB)} // answers at once
				r := f.runnerOver(map[string]failover.Provider{"alpha": alpha, "beta": beta}, "beta")
				j := f.submit(t, "k", "alpha")
				var alphaAttempt atomic.Value
				if tt.onFailed != nil {
					h.add(jobs.EventAttemptFailed, func(e jobs.Event) {
						if a, ok := alphaAttempt.Load().(jobs.Attempt); ok && e.AttemptID == a.ID {
							tt.onFailed(t, f, a)
						}
					})
				}

				wait := runAsync(context.Background(), r, j.ID)
				c := alpha.next(t)
				alphaAttempt.Store(c.attempt)
				c.acknowledge(t, "alpha-ref")
				if tt.meanwhile != nil {
					tt.meanwhile(t, f, c.attempt)
				}
				c.answer(tt.result, tt.err)
				got, err := wait(t)

				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
					t.Errorf("Run = %v, want %v", err, tt.wantErr)
				}
				var te *jobs.TransitionError
				if errors.Is(tt.wantErr, jobs.ErrInvalidTransition) && (!errors.As(err, &te) || te.AttemptID != c.attempt.ID) {
					t.Errorf("Run's error %v does not name alpha's attempt %s", err, c.attempt.ID)
				}
				if called := beta.callCount() > 0; called != tt.wantBeta {
					t.Errorf("fallback called: %v, want %v", called, tt.wantBeta)
				}
				if got := strings.Join(states(f.attempts(t, j.ID)), " "); got != tt.wantStates {
					t.Errorf("attempts %s, want %s", got, tt.wantStates)
				}
				stored, _ := f.m.Get(context.Background(), j.ID)
				if tt.wantResult != "" && (stored.State != jobs.JobSucceeded || string(stored.Result) != tt.wantResult || string(got.Result) != tt.wantResult) {
					t.Errorf("job %s with %s (Run returned %s), want succeeded with %s", stored.State, stored.Result, got.Result, tt.wantResult)
				}
				// Where the job has its winner, the Runner does not even
				// ask the store for another attempt.
				if tt.wantResult != "" && !tt.wantBeta {
					if n := f.ev.Count(jobs.EventAttemptRefused); n != 0 {
						t.Errorf("%d attempts refused: the Runner tried to start one on a completed job", n)
					}
				}
				f.checkInvariants(t)
			})
		}
	})
}

// A job closed by someone else while the Runner has calls in flight: by
// default each call runs to its end and its truth is recorded (the result
// dropped, the attempt cancelled by Complete); with AbandonLosers the calls
// are cancelled at once.
func TestRunnerOnAJobClosedMeanwhile(t *testing.T) {
	tests := []struct {
		name        string
		abandon     bool
		alphaResult bool // alpha's call returns its result even when cancelled
		wantA       string
		wantReasonA string
	}{
		{"waits for the calls in flight", false, true, "alpha=cancelled", jobs.ReasonDroppedJobCancelled},
		// The provider may still act on a call the runner stopped waiting
		// for: the attempt is in doubt, and keeps the job's key.
		{"AbandonLosers cancels them", true, false, "alpha=unknown", "abandoned: the job is closed; the provider may still act"},
		{"AbandonLosers, the provider answers anyway", true, true, "alpha=cancelled", jobs.ReasonDroppedJobCancelled},
	}
	forEachStore(t, func(t *testing.T, sc storeCase) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				f := newFixture(t, sc)
				f.verify(t, "beta", goodB)
				h := f.withHooks()
				alpha, beta := newScripted("alpha", f.clock), newScripted("beta", f.clock)
				r := f.runnerOver(map[string]failover.Provider{"alpha": alpha, "beta": beta}, "beta")
				r.HedgeAfter = 10 * time.Second
				r.AbandonLosers = tt.abandon
				j := f.submit(t, "k", "alpha")

				wait := runAsync(context.Background(), r, j.ID)
				a := alpha.next(t)
				a.acknowledge(t, "alpha-ref")
				f.clock.Step(t, 2, 10*time.Second) // the hedge timer and alpha's deadline: the silence passes
				b := beta.next(t)
				b.acknowledge(t, "beta-ref")
				if _, err := f.m.CancelJob(context.Background(), j.ID, "the user gave up"); err != nil {
					t.Fatal(err)
				}
				var alphaRecorded atomic.Bool
				wantEvent := jobs.EventResultDropped
				if !tt.alphaResult {
					wantEvent = jobs.EventAttemptUnknown
				}
				h.add(wantEvent, func(e jobs.Event) {
					if e.AttemptID == a.attempt.ID {
						alphaRecorded.Store(true)
					}
				})
				b.answer(goodB, nil) // dropped: the job is cancelled

				if tt.abandon {
					<-a.ctx.Done() // abandoned
				}
				if tt.alphaResult {
					// alpha worked all the same, and its result is its truth.
					a.answer(goodA, nil)
				} else {
					a.answer("", a.ctx.Err())
				}
				if _, err := wait(t); !errors.Is(err, jobs.ErrJobClosed) {
					t.Fatalf("Run = %v, want ErrJobClosed", err)
				}
				if !tt.abandon && a.endErr != nil {
					t.Errorf("alpha's call was cancelled (%v) although AbandonLosers is off", a.endErr)
				}
				as := f.attempts(t, j.ID)
				if !slices.Equal(states(as), []string{tt.wantA, "beta=cancelled"}) {
					t.Fatalf("attempts %v, want [%s beta=cancelled]", states(as), tt.wantA)
				}
				if as[0].Reason != tt.wantReasonA || as[1].Reason != jobs.ReasonDroppedJobCancelled {
					t.Errorf("reasons %q, %q; want %q, %q", as[0].Reason, as[1].Reason, tt.wantReasonA, jobs.ReasonDroppedJobCancelled)
				}
				if !alphaRecorded.Load() {
					t.Errorf("no %s event for alpha's attempt", wantEvent)
				}
				// Whatever alpha's provider did or may still do, the job
				// keeps its key: a second job could act on the intent twice.
				_, _, err := f.m.Submit(context.Background(), jobs.SubmitRequest{Owner: j.Owner, Key: j.Key, Kind: j.Kind,
					Provider: j.Provider, Params: j.Params, Reuse: jobs.KeyReuseAfterFailureOrCancel})
				if wantErr := !tt.alphaResult; errors.Is(err, jobs.ErrAttemptInFlight) != wantErr || (err != nil && !wantErr) {
					t.Errorf("Submit with key reuse = %v; want ErrAttemptInFlight %v", err, wantErr)
				}
				if got, _ := f.m.Get(context.Background(), j.ID); got.State != jobs.JobCancelled || got.Result != nil {
					t.Errorf("job %s with %s, want cancelled without a result", got.State, got.Result)
				}
				f.clock.WaitTimers(t, 0)
				f.checkInvariants(t)
			})
		}
	})
}
