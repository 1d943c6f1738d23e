package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// newFakeClock returns the manual clock of a fixture.
func newFakeClock() *jobstest.Clock {
	return jobstest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

// fixture is what a test of contracts and verification needs: a manager on
// a fake clock with the summary contract, and its store.
type fixture struct {
	store testdb.Store
	clock *jobstest.Clock
	m     *jobs.Manager
	ev    *events
	opts  jobs.Options
}

func newFixture(t *testing.T, sc storeCase) *fixture {
	t.Helper()
	s, _ := sc.Open(t)
	f := &fixture{store: s, clock: newFakeClock(), ev: &events{}}
	f.opts = jobs.Options{
		Clock:     f.clock,
		Logger:    discard,
		Observer:  f.ev,
		Contracts: map[string]jobs.Contract{kindSummarize: summaryContract("v1")},
	}
	f.m = jobstest.NewManager(t, s, f.opts)
	return f
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
