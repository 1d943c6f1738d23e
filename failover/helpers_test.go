package failover_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// newFakeClock returns the manual clock the failover tests drive.
func newFakeClock() *jobstest.Clock {
	return jobstest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
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
	outcomes map[string]failover.Outcome
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

func (p *fakeProvider) Lookup(ctx context.Context, a jobs.Attempt) (failover.Outcome, error) {
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
		return failover.Outcome{}, fmt.Errorf("%s: lookup %s: not scripted", p.name, key)
	}
	return o, nil
}

func (p *fakeProvider) setOutcome(ref string, o failover.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcomes == nil {
		p.outcomes = map[string]failover.Outcome{}
	}
	p.outcomes[ref] = o
}

func (p *fakeProvider) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// fixture is what a failover test needs: a manager on a fake clock with the
// summary contract, and its store.
type fixture struct {
	store   testdb.Store
	another func() testdb.Store
	clock   *jobstest.Clock
	m       *jobs.Manager
	ev      *events
	opts    jobs.Options
}

func newFixture(t *testing.T, sc storeCase) *fixture {
	t.Helper()
	s, another := sc.Open(t)
	f := &fixture{store: s, another: another, clock: newFakeClock(), ev: &events{}}
	f.opts = jobs.Options{
		Clock:     f.clock,
		Logger:    discard,
		Observer:  f.ev,
		Contracts: map[string]jobs.Contract{kindSummarize: summaryContract("v1")},
	}
	f.m = jobstest.NewManager(t, s, f.opts)
	return f
}

// managerOn returns a manager like f.m over another store handle. New
// accepted f.opts already, for f.m.
func (f *fixture) managerOn(s testdb.Store) *jobs.Manager {
	m, err := jobs.New(s, f.opts)
	if err != nil {
		panic(err)
	}
	return m
}

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
	vs, err := invariant.Check(context.Background(), f.store)
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
func runAsync(ctx context.Context, r *failover.Runner, jobID string) func(t *testing.T) (jobs.Job, error) {
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

// The shared fixtures of internal/testdb, by their names here.
type (
	storeCase = testdb.StoreCase
	events    = testdb.Events
)

const kindSummarize = testdb.KindSummarize

var (
	summaryContract = testdb.SummaryContract
	forEachStore    = testdb.ForEachStore
)
