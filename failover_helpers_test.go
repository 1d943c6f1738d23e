package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// fakeClock is a jobs.Clock whose time moves only when a test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

type fakeTimer struct {
	c      *fakeClock
	at     time.Time
	ch     chan time.Time
	active bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) jobs.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1), active: true}
	if d <= 0 {
		t.active = false
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.signal()
	return t
}

func (c *fakeClock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	t.c.prune()
	t.c.signal()
	return was
}

func (c *fakeClock) prune() {
	live := c.timers[:0]
	for _, t := range c.timers {
		if t.active {
			live = append(live, t)
		}
	}
	c.timers = live
}

// Advance moves the clock forward by d, firing due timers in time order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	for _, t := range c.timers {
		if t.active && !t.at.After(end) {
			c.now = t.at
			t.active = false
			t.ch <- t.at
		}
	}
	c.now = end
	c.prune()
	c.signal()
}

// waitTimers waits until exactly n timers are pending. Goroutines under
// test register their timers when they reach a waiting point, so this is
// how a test knows that they got there. It fails the test after 20 s of
// real time.
func (c *fakeClock) waitTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %d pending timers: have %d", n, got)
		}
	}
}

// step waits for n pending timers, then advances the clock by d.
func (c *fakeClock) step(t testing.TB, n int, d time.Duration) {
	t.Helper()
	c.waitTimers(t, n)
	c.Advance(d)
}

// fakeProvider is a scripted provider: it acknowledges each call (unless
// noAck), waits delay on the fake clock, then returns result or err. Its
// Lookup answers from outcomes, by reference, or by the attempt's key when
// it has none, and counts the questions.
type fakeProvider struct {
	name   string
	clock  jobs.Clock
	delay  time.Duration
	result json.RawMessage
	err    error
	noAck  bool

	mu       sync.Mutex
	calls    int
	ctxErrs  []error // the call context's error when each call ended
	outcomes map[string]jobs.Outcome
	lookups  map[string]int
}

func (p *fakeProvider) ref(a jobs.Attempt) string { return p.name + ":" + a.ID }

func (p *fakeProvider) Call(ctx context.Context, job jobs.Job, a jobs.Attempt, ack func(string) error) (json.RawMessage, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	if !p.noAck {
		ack(p.ref(a))
	}
	t := p.clock.NewTimer(p.delay)
	select {
	case <-t.C():
	case <-ctx.Done():
		t.Stop()
		p.mu.Lock()
		p.ctxErrs = append(p.ctxErrs, ctx.Err())
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	return p.result, p.err
}

func (p *fakeProvider) Lookup(ctx context.Context, a jobs.Attempt) (jobs.Outcome, error) {
	key := a.ProviderRef
	if key == "" {
		key = a.ProviderKey()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lookups == nil {
		p.lookups = map[string]int{}
	}
	p.lookups[key]++
	o, ok := p.outcomes[key]
	if !ok {
		return jobs.Outcome{}, fmt.Errorf("%s: lookup %s: not scripted", p.name, key)
	}
	return o, nil
}

func (p *fakeProvider) setOutcome(ref string, o jobs.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcomes == nil {
		p.outcomes = map[string]jobs.Outcome{}
	}
	p.outcomes[ref] = o
}

func (p *fakeProvider) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// summaryContract accepts {"summary": "<non-empty text>"} and nothing else.
func summaryContract(version string) jobs.Contract {
	return jobs.Contract{Version: version, Validate: func(raw json.RawMessage) error {
		var v struct {
			Summary *string `json:"summary"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not a summary object: %v", err)
		}
		if v.Summary == nil || *v.Summary == "" {
			return errors.New("summary is missing or empty")
		}
		return nil
	}}
}

const kindSummarize = "summarize"

// events collects a Manager's events.
type events struct {
	mu  sync.Mutex
	all []jobs.Event
}

func (e *events) Observe(_ context.Context, ev jobs.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) count(typ jobs.EventType) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// storeCase opens stores of one dialect: open returns a store on a fresh
// database, and another returns a second, independent handle on that same
// database, as a second process would have.
type storeCase struct {
	name string
	open func(t *testing.T) (s jobs.Store, another func() jobs.Store)
}

func storeCases() []storeCase {
	return []storeCase{
		{"sqlite", func(t *testing.T) (jobs.Store, func() jobs.Store) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return jobstest.NewSQLiteAt(t, path), func() jobs.Store { return jobstest.NewSQLiteAt(t, path) }
		}},
		{"postgres", func(t *testing.T) (jobs.Store, func() jobs.Store) {
			dsn := jobstest.PostgresDSN(t)
			open := func() jobs.Store {
				s, err := jobs.OpenPostgres(context.Background(), dsn)
				if err != nil {
					t.Fatalf("open postgres: %v", err)
				}
				s.DB().SetMaxOpenConns(4)
				t.Cleanup(func() { s.Close() })
				return s
			}
			return open(), open
		}},
	}
}

// forEachStore runs fn as a parallel subtest per dialect.
func forEachStore(t *testing.T, fn func(t *testing.T, sc storeCase)) {
	t.Helper()
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			fn(t, sc)
		})
	}
}

// fixture is what a failover test needs: a manager on a fake clock with the
// summary contract, and its store.
type fixture struct {
	store   jobs.Store
	another func() jobs.Store
	clock   *fakeClock
	m       *jobs.Manager
	ev      *events
	opts    jobs.Options
}

func newFixture(t *testing.T, sc storeCase) *fixture {
	t.Helper()
	s, another := sc.open(t)
	f := &fixture{store: s, another: another, clock: newFakeClock(), ev: &events{}}
	f.opts = jobs.Options{
		Now:       f.clock.Now,
		Logger:    discard,
		Observer:  f.ev,
		Contracts: map[string]jobs.Contract{kindSummarize: summaryContract("v1")},
	}
	f.m = jobs.New(s, f.opts)
	return f
}

// managerOn returns a manager like f.m over another store handle.
func (f *fixture) managerOn(s jobs.Store) *jobs.Manager { return jobs.New(s, f.opts) }

func (f *fixture) submit(t *testing.T, key, provider string) jobs.Job {
	t.Helper()
	j, _, err := f.m.Submit(context.Background(), jobs.SubmitRequest{
		Owner: "user-1", Key: key, Kind: kindSummarize, Provider: provider, Params: json.RawMessage(`{"text":"a long article"}`),
	})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j
}

// verify records a verification of provider for the summary kind.
func (f *fixture) verify(t *testing.T, provider string, out string, opts ...jobs.VerifyOption) jobs.Verification {
	t.Helper()
	v, err := f.m.VerifyProvider(context.Background(), provider, kindSummarize,
		func(context.Context) (json.RawMessage, error) { return json.RawMessage(out), nil }, opts...)
	if err != nil {
		t.Fatalf("verify %s: %v", provider, err)
	}
	return v
}

func (f *fixture) attempts(t *testing.T, jobID string) []jobs.Attempt {
	t.Helper()
	as, err := f.m.Attempts(context.Background(), jobID)
	if err != nil {
		t.Fatalf("attempts: %v", err)
	}
	return as
}

func (f *fixture) checkInvariants(t *testing.T) {
	t.Helper()
	vs, err := jobstest.CheckInvariants(context.Background(), f.store)
	if err != nil {
		t.Fatalf("check invariants: %v", err)
	}
	for _, v := range vs {
		t.Errorf("invariant: %s", v)
	}
}

func states(as []jobs.Attempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Provider + "=" + string(a.State)
	}
	return out
}

// runAsync runs r.Run in a goroutine; the returned function waits for it.
func runAsync(ctx context.Context, r *jobs.Runner, jobID string) func(t *testing.T) (jobs.Job, error) {
	type res struct {
		j   jobs.Job
		err error
	}
	ch := make(chan res, 1)
	go func() {
		j, err := r.Run(ctx, jobID)
		ch <- res{j, err}
	}()
	return func(t *testing.T) (jobs.Job, error) {
		t.Helper()
		select {
		case r := <-ch:
			return r.j, r.err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
			return jobs.Job{}, nil
		}
	}
}
