package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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
	open func(t *testing.T) (s testdb.Store, another func() testdb.Store)
}

func storeCases() []storeCase {
	return []storeCase{
		{"sqlite", func(t *testing.T) (testdb.Store, func() testdb.Store) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return testdb.NewSQLiteAt(t, path), func() testdb.Store { return testdb.NewSQLiteAt(t, path) }
		}},
		{"postgres", func(t *testing.T) (testdb.Store, func() testdb.Store) {
			dsn := testdb.PostgresDSN(t)
			open := func() testdb.Store {
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
	s, _ := sc.open(t)
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
