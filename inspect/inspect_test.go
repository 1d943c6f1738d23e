package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/inspect"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

// stores are the stores every test runs on.
var stores = []struct {
	name string
	open func(t testing.TB) jobs.Store
}{
	{"memstore", func(testing.TB) jobs.Store { return memstore.New() }},
	{"sqlite", func(t testing.TB) jobs.Store { return testdb.NewSQLite(t) }},
	{"postgres", func(t testing.TB) jobs.Store { return testdb.NewPostgres(t) }},
}

type env struct {
	ctx   context.Context
	clock *jobstest.Clock
	m     *jobs.Manager
	in    *inspect.Inspector
}

func forEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			clock := jobstest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
			m := jobstest.NewManager(t, sc.open(t), jobs.Options{Clock: clock})
			fn(t, &env{ctx: context.Background(), clock: clock, m: m, in: inspect.New(m)})
		})
	}
}

func (e *env) submit(t *testing.T, owner, key, kind, provider string) jobs.Job {
	t.Helper()
	e.clock.Advance(time.Millisecond) // IDs order jobs by their creation's millisecond
	j, _, err := e.m.Submit(e.ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: kind, Provider: provider, Params: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func ids(js []jobs.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

func TestListPagesAndCounts(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var all []jobs.Job
		for i := range 7 {
			owner := []string{"alice", "bob"}[i%2]
			all = append(all, e.submit(t, owner, "k"+string(rune('a'+i)), "charge", "stripe"))
		}
		e.clock.Advance(time.Hour)
		late := e.submit(t, "alice", "late", "refund", "adyen")

		var got []string
		f := inspect.Filter{Owner: "alice", Limit: 2}
		for range 5 {
			p, err := e.in.List(e.ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(p.Jobs)...)
			if p.Next == "" {
				break
			}
			f.After = p.Next
		}
		want := []string{late.ID, all[6].ID, all[4].ID, all[2].ID, all[0].ID}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("alice's jobs, newest first, by pages of 2 (-want +got):\n%s", diff)
		}
		for _, tc := range []struct {
			f    inspect.Filter
			want int64
		}{
			{inspect.Filter{}, 8},
			{inspect.Filter{Owner: "alice"}, 5},
			{inspect.Filter{Kind: "refund"}, 1},
			{inspect.Filter{OlderThan: 30 * time.Minute}, 7},
			{inspect.Filter{NewerThan: 30 * time.Minute}, 1},
			{inspect.Filter{States: []jobs.JobState{jobs.JobRunning}}, 0},
		} {
			if n, err := e.in.Count(e.ctx, tc.f); err != nil || n != tc.want {
				t.Errorf("Count(%+v) = %d, %v; want %d", tc.f, n, err, tc.want)
			}
		}
		if _, err := e.in.List(e.ctx, inspect.Filter{Limit: inspect.MaxLimit + 1}); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("List with too large a limit = %v, want ErrInvalidInput", err)
		}
	})
}

func TestFindAndStory(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j := e.submit(t, "alice", "order-1", "charge", "stripe")
		a, err := e.m.StartAttempt(e.ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.MarkRunning(e.ctx, a.ID, "ch_123"); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{j.ID, a.ID, "ch_123"} {
			f, err := e.in.Find(e.ctx, q)
			if err != nil || len(f.Jobs) != 1 || f.Jobs[0].ID != j.ID {
				t.Errorf("Find(%q) = %+v, %v; want job %s", q, f, err, j.ID)
			}
		}
		for _, q := range []string{"", "job_nothing", "att_nothing", "ch_999"} {
			if f, err := e.in.Find(e.ctx, q); err != nil || len(f.Jobs) != 0 {
				t.Errorf("Find(%q) = %+v, %v; want nothing", q, f, err)
			}
		}
		if got, err := e.in.FindByKey(e.ctx, "alice", "order-1"); err != nil || got.ID != j.ID {
			t.Errorf("FindByKey = %v, %v", got.ID, err)
		}

		// A key reused after a failure: the story shows the chain.
		if _, err := e.m.Fail(e.ctx, a.ID, "declined"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.FailJob(e.ctx, j.ID, "gave up"); err != nil {
			t.Fatal(err)
		}
		j2, created, err := e.m.Submit(e.ctx, jobs.SubmitRequest{Owner: "alice", Key: "order-1", Kind: "charge", Provider: "stripe",
			Params: []byte(`{"n":1}`), Reuse: jobs.KeyReuseAfterFailure})
		if err != nil || !created {
			t.Fatalf("Submit with key reuse = %v, %v", created, err)
		}
		for _, id := range []string{j.ID, j2.ID} {
			s, err := e.in.Story(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{j.ID, j2.ID}, ids(s.Chain)); diff != "" {
				t.Errorf("chain of %s (-want +got):\n%s", id, diff)
			}
		}
		s, err := e.in.Story(e.ctx, j.ID)
		if err != nil || len(s.Attempts) != 1 || s.Attempts[0].State != jobs.AttemptFailed {
			t.Errorf("Story = %+v, %v", s, err)
		}
		if _, err := e.in.Story(e.ctx, "job_00000000000000000000000000"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Story of no job = %v, want ErrNotFound", err)
		}
	})
}

// unsupportedProvider cannot look anything up.
type unsupportedProvider struct{}

func (unsupportedProvider) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, errors.New("not called")
}

func (unsupportedProvider) Lookup(context.Context, jobs.Attempt) (failover.Outcome, error) {
	return failover.Outcome{}, failover.ErrLookupUnsupported
}

func TestInDoubtPutsWhatNeedsAnOperatorFirst(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var as []jobs.Attempt
		for i, p := range []string{"alpha", "beta", "alpha"} {
			j := e.submit(t, []string{"alice", "bob", "alice"}[i], "k"+p+string(rune('0'+i)), "charge", p)
			a, err := e.m.StartAttempt(e.ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			as = append(as, a)
		}
		if _, err := e.m.MarkUnknown(e.ctx, as[1].ID, "timed out"); err != nil {
			t.Fatal(err)
		}
		// beta cannot look its request up: it needs an operator.
		e.clock.Advance(time.Hour)
		rec := &failover.Reconciler{Manager: e.m, Logger: slog.New(slog.DiscardHandler), Providers: map[string]failover.Provider{"beta": unsupportedProvider{}}}
		if _, err := rec.ReconcileAttempt(e.ctx, as[1].ID); err != nil {
			t.Fatal(err)
		}
		ds, err := e.in.InDoubt(e.ctx, inspect.InDoubtQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.Attempt.ID)
		}
		_, keeps := e.m.Store().(jobs.LookupStore)
		want := []string{as[0].ID, as[1].ID, as[2].ID}
		if keeps {
			want = []string{as[1].ID, as[0].ID, as[2].ID}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("in doubt (-want +got):\n%s", diff)
		}
		if keeps && (!ds[0].NeedsOperator || ds[0].Reconcile.LookupAt.IsZero() || ds[0].Age != time.Hour+time.Millisecond) {
			t.Errorf("first in doubt: %+v", ds[0])
		}
		ds, err = e.in.InDoubt(e.ctx, inspect.InDoubtQuery{Limit: 10, Owners: []string{"alice"}})
		if err != nil || len(ds) != 2 || ds[0].Job.Owner != "alice" || ds[1].Job.Owner != "alice" {
			t.Errorf("alice's in doubt = %+v, %v", ds, err)
		}
	})
}

func TestProviders(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		for i, p := range []string{"alpha", "alpha", "beta"} {
			j := e.submit(t, "alice", "p"+string(rune('0'+i)), "charge", p)
			a, err := e.m.StartAttempt(e.ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(2 * time.Second)
			if i == 1 {
				_, err = e.m.Fail(e.ctx, a.ID, "no")
			} else {
				_, err = e.m.Complete(e.ctx, a.ID, []byte(`{}`))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rep, err := e.in.Providers(e.ctx, inspect.ProvidersQuery{Window: time.Hour, Buckets: 6})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Providers) != 2 || rep.Providers[0].Provider != "alpha" || rep.Sampled {
			t.Fatalf("Providers = %+v", rep)
		}
		alpha := rep.Providers[0]
		if alpha.Total.Succeeded != 1 || alpha.Total.Failed != 1 || alpha.Total.Latency != 2*time.Second || len(alpha.Buckets) != 6 {
			t.Errorf("alpha = %+v", alpha.Total)
		}
		if got := alpha.Buckets[5].Attempts(); got != 2 {
			t.Errorf("alpha's last bucket counts %d attempts, want 2", got)
		}
		rep, err = e.in.Providers(e.ctx, inspect.ProvidersQuery{Window: time.Hour, MaxAttempts: 2})
		if err != nil || !rep.Sampled {
			t.Errorf("Providers of 3 attempts, reading 2 = %+v, %v; want Sampled", rep, err)
		}
	})
}

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  inspect.Filter
		err   bool
	}{
		{"", inspect.Filter{}, false},
		{"owner=alice&state=running,failed&kind=charge&provider=stripe&newer-than=7d&older-than=90m&order=oldest&limit=10",
			inspect.Filter{Owner: "alice", States: []jobs.JobState{jobs.JobRunning, jobs.JobFailed}, Kind: "charge", Provider: "stripe",
				NewerThan: 7 * 24 * time.Hour, OlderThan: 90 * time.Minute, Oldest: true, Limit: 10}, false},
		{"state=sleeping", inspect.Filter{}, true},
		{"newer-than=soon", inspect.Filter{}, true},
		{"older-than=-5m", inspect.Filter{}, true},
		{"limit=x", inspect.Filter{}, true},
		{"limit=100000", inspect.Filter{}, true},
	} {
		v, _ := url.ParseQuery(tc.query)
		got, err := inspect.ParseFilter(v)
		if tc.err {
			if !errors.Is(err, jobs.ErrInvalidInput) {
				t.Errorf("ParseFilter(%q) = %v, want ErrInvalidInput", tc.query, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseFilter(%q): %v", tc.query, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseFilter(%q) (-want +got):\n%s", tc.query, diff)
		}
		back, err := inspect.ParseFilter(got.Values())
		if err != nil || !cmp.Equal(back, got) {
			t.Errorf("ParseFilter(Values()) of %q = %+v, %v", tc.query, back, err)
		}
	}
}
