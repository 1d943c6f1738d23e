package jobstest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// testCountJobs proves JobCounter.CountJobs: it counts what ListJobs
// lists, for each filter, whatever the page asked for.
func testCountJobs(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	counter := e.store.(jobs.JobCounter)
	for i, owner := range []string{"alice", "alice", "bob", "alice"} {
		r := req(owner, "count-"+randomHex(3))
		r.Kind = []string{"charge", "refund"}[i%2]
		j := e.submit(r)
		if i == 3 {
			e.running(j.ID)
		}
	}
	for _, tc := range []struct {
		name string
		q    jobs.JobQuery
		want int64
	}{
		{"everything", jobs.JobQuery{}, 4},
		{"owner", jobs.JobQuery{Owner: "alice"}, 3},
		{"owner and kind", jobs.JobQuery{Owner: "alice", Kind: "refund"}, 2},
		{"state", jobs.JobQuery{States: []jobs.JobState{jobs.JobRunning}}, 1},
		{"page ignored", jobs.JobQuery{Owner: "alice", Limit: 1, After: "job_zzzz", Newest: true}, 3},
		{"nothing", jobs.JobQuery{Owner: "nobody"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := counter.CountJobs(e.ctx, tc.q)
			if err != nil || n != tc.want {
				t.Errorf("CountJobs(%+v) = %d, %v; want %d", tc.q, n, err, tc.want)
			}
		})
	}
	if _, err := counter.CountJobs(e.ctx, jobs.JobQuery{States: []jobs.JobState{"sleeping"}}); !errors.Is(err, jobs.ErrInvalidInput) {
		t.Errorf("CountJobs with a bad state: %v, want ErrInvalidInput", err)
	}
}

// testListAttempts proves AttemptLister.ListAttempts: by provider
// reference, provider, states and creation time, both orders, and pages.
func testListAttempts(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	lister := e.store.(jobs.AttemptLister)
	t0 := e.clock.Now()

	j1 := e.newJob()
	a1 := e.start(j1.ID, "alpha")
	if _, err := e.m.MarkRunning(e.ctx, a1.ID, "ref-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Fail(e.ctx, a1.ID, "no"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond) // IDs order attempts by their creation's millisecond
	a2 := e.start(j1.ID, "beta")
	if _, err := e.m.MarkUnknown(e.ctx, a2.ID, "timed out"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	j2 := e.newJob()
	a3 := e.start(j2.ID, "alpha") // starting
	j3 := e.newJob()
	e.clock.Advance(time.Millisecond)
	a4 := e.start(j3.ID, "alpha")
	if _, err := e.m.MarkRunning(e.ctx, a4.ID, "ref-4"); err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Hour)

	for _, tc := range []struct {
		name string
		q    jobs.AttemptQuery
		want []string
	}{
		{"everything", jobs.AttemptQuery{}, []string{a1.ID, a2.ID, a3.ID, a4.ID}},
		{"reference", jobs.AttemptQuery{ProviderRef: "ref-4"}, []string{a4.ID}},
		{"reference of none", jobs.AttemptQuery{ProviderRef: "ref-9"}, nil},
		{"provider", jobs.AttemptQuery{Provider: "alpha"}, []string{a1.ID, a3.ID, a4.ID}},
		{"in doubt", jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}}, []string{a2.ID, a3.ID}},
		{"created after", jobs.AttemptQuery{CreatedAfter: t1}, []string{a3.ID, a4.ID}},
		{"created before", jobs.AttemptQuery{CreatedBefore: t1}, []string{a1.ID, a2.ID}},
		{"together", jobs.AttemptQuery{Provider: "alpha", States: []jobs.AttemptState{jobs.AttemptRunning}, CreatedAfter: t1}, []string{a4.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lister.ListAttempts(e.ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, attemptIDs(got)); diff != "" {
				t.Errorf("oldest first (-want +got):\n%s", diff)
			}
			q := tc.q
			q.Newest = true
			got, err = lister.ListAttempts(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tc.want)
			slices.Reverse(want)
			if diff := cmp.Diff(want, attemptIDs(got)); diff != "" {
				t.Errorf("newest first (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("pages", func(t *testing.T) {
		var seen []string
		after := ""
		for range 4 {
			page, err := lister.ListAttempts(e.ctx, jobs.AttemptQuery{Newest: true, After: after, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			seen = append(seen, attemptIDs(page)...)
			after = page[len(page)-1].ID
		}
		if diff := cmp.Diff([]string{a4.ID, a3.ID, a2.ID, a1.ID}, seen); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
	})
	t.Run("read whole", func(t *testing.T) {
		got, err := lister.ListAttempts(e.ctx, jobs.AttemptQuery{ProviderRef: "ref-1"})
		if err != nil || len(got) != 1 {
			t.Fatalf("ListAttempts = %v, %v", got, err)
		}
		if diff := cmp.Diff(e.attempt(a1.ID), got[0]); diff != "" {
			t.Errorf("listed attempt differs from Attempt (-want +got):\n%s", diff)
		}
	})
	if _, err := lister.ListAttempts(e.ctx, jobs.AttemptQuery{States: []jobs.AttemptState{"asleep"}}); !errors.Is(err, jobs.ErrInvalidInput) {
		t.Errorf("ListAttempts with a bad state: %v, want ErrInvalidInput", err)
	}
}

func attemptIDs(as []jobs.Attempt) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

// testLookups proves LookupStore: a recorded lookup is read back, replaces
// the one before, changes nothing else of the attempt, and appears beside
// the reconciler's claim; bad input and unknown attempts write nothing.
func testLookups(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	ls := e.store.(jobs.LookupStore)
	j := e.newJob()
	a := e.start(j.ID, "")
	a, err := e.m.MarkUnknown(e.ctx, a.ID, "timed out")
	if err != nil {
		t.Fatal(err)
	}
	other := e.start(e.newJob().ID, "")

	states, err := ls.ReconcileStates(e.ctx, []string{a.ID, other.ID, "att_none"})
	if err != nil || len(states) != 2 {
		t.Fatalf("ReconcileStates before any lookup = %v, %v; want two empty states", states, err)
	}
	for _, s := range states {
		if !s.LookupAt.IsZero() || s.LookupAnswer != "" || s.ClaimToken != "" {
			t.Errorf("state of %s before any lookup: %+v", s.AttemptID, s)
		}
	}

	at := e.clock.Now().Add(time.Second)
	for _, answer := range []string{"error: connection refused", "pending"} {
		if err := ls.RecordLookup(e.ctx, jobs.AttemptLookup{AttemptID: a.ID, At: at, Answer: answer}); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Second)
	}
	want := jobs.ReconcileState{AttemptID: a.ID, LookupAt: at.Add(-time.Second), LookupAnswer: "pending"}
	claimed := a
	if cs, ok := e.store.(jobs.ClaimStore); ok {
		claimed, ok, err = cs.ClaimAttempt(e.ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
			Token: "clm_test", At: at, Until: at.Add(time.Minute)})
		if err != nil || !ok {
			t.Fatalf("ClaimAttempt = %v, %v", ok, err)
		}
		want.ClaimToken, want.ClaimedUntil = "clm_test", at.Add(time.Minute)
	}
	states, err = ls.ReconcileStates(e.ctx, []string{a.ID})
	if err != nil || len(states) != 1 {
		t.Fatalf("ReconcileStates = %v, %v", states, err)
	}
	if diff := cmp.Diff(want, states[0], timesEqual); diff != "" {
		t.Errorf("ReconcileStates (-want +got):\n%s", diff)
	}
	if got := e.attempt(a.ID); got != claimed || got.State != jobs.AttemptUnknown || got.Reason != "timed out" {
		t.Errorf("the lookups changed the attempt: %+v", got)
	}

	for _, tc := range []struct {
		name string
		l    jobs.AttemptLookup
		want error
	}{
		{"no attempt", jobs.AttemptLookup{At: at, Answer: "pending"}, jobs.ErrInvalidInput},
		{"no time", jobs.AttemptLookup{AttemptID: a.ID, Answer: "pending"}, jobs.ErrInvalidInput},
		{"no answer", jobs.AttemptLookup{AttemptID: a.ID, At: at}, jobs.ErrInvalidInput},
		{"answer too long", jobs.AttemptLookup{AttemptID: a.ID, At: at, Answer: strings.Repeat("x", 4097)}, jobs.ErrInvalidInput},
		{"answer with NUL", jobs.AttemptLookup{AttemptID: a.ID, At: at, Answer: "a\x00b"}, jobs.ErrInvalidInput},
		{"unknown attempt", jobs.AttemptLookup{AttemptID: "att_00000000000000000000000000", At: at, Answer: "pending"}, jobs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ls.RecordLookup(e.ctx, tc.l); !errors.Is(err, tc.want) {
				t.Errorf("RecordLookup = %v, want %v", err, tc.want)
			}
		})
	}
	states, err = ls.ReconcileStates(e.ctx, []string{a.ID})
	if err != nil || len(states) != 1 || states[0].LookupAnswer != "pending" {
		t.Errorf("refused lookups wrote something: %+v, %v", states, err)
	}
}

// timesEqual compares times by instant, to the microsecond the SQL stores
// keep.
var timesEqual = cmp.Comparer(func(x, y time.Time) bool {
	return x.Truncate(time.Microsecond).Equal(y.Truncate(time.Microsecond))
})
