package jobstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// testListJobs proves JobLister.ListJobs: each filter alone and together,
// both orders, and pages that follow each other by the last ID without
// gaps or repeats.
func testListJobs(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	lister := e.store.(jobs.JobLister)
	var all []jobs.Job
	t0 := e.clock.Now()
	for i, spec := range []struct {
		owner, kind, provider string
		state                 jobs.JobState
	}{
		{"alice", "charge", "stripe", jobs.JobPending},
		{"bob", "charge", "adyen", jobs.JobRunning},
		{"alice", "refund", "stripe", jobs.JobSucceeded},
		{"alice", "charge", "stripe", jobs.JobFailed},
		{"bob", "refund", "adyen", jobs.JobCancelled},
		{"carol", "charge", "stripe", jobs.JobRunning},
		{"alice", "charge", "adyen", jobs.JobPending},
	} {
		r := req(spec.owner, "list-"+randomHex(3))
		r.Kind, r.Provider = spec.kind, spec.provider
		j := e.submit(r)
		switch spec.state {
		case jobs.JobRunning:
			e.running(j.ID)
		case jobs.JobSucceeded:
			if _, err := e.m.Complete(e.ctx, e.start(j.ID, "").ID, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		case jobs.JobFailed:
			if _, err := e.m.FailJob(e.ctx, j.ID, "gave up"); err != nil {
				t.Fatal(err)
			}
		case jobs.JobCancelled:
			if _, err := e.m.CancelJob(e.ctx, j.ID, "stop"); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, e.job(j.ID))
		if i == 2 {
			e.clock.Advance(time.Hour)
		}
	}
	t1 := t0.Add(time.Hour)
	ids := func(js []jobs.Job) []string {
		if len(js) == 0 {
			return nil
		}
		out := make([]string, len(js))
		for i, j := range js {
			out[i] = j.ID
		}
		return out
	}
	where := func(keep func(j jobs.Job) bool) []string {
		var out []string
		for _, j := range all {
			if keep(j) {
				out = append(out, j.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name string
		q    jobs.JobQuery
		want []string
	}{
		{"everything", jobs.JobQuery{}, where(func(jobs.Job) bool { return true })},
		{"owner", jobs.JobQuery{Owner: "alice"}, where(func(j jobs.Job) bool { return j.Owner == "alice" })},
		{"open states", jobs.JobQuery{States: []jobs.JobState{jobs.JobPending, jobs.JobRunning}},
			where(func(j jobs.Job) bool { return !j.State.Terminal() })},
		{"kind and provider", jobs.JobQuery{Kind: "charge", Provider: "stripe"},
			where(func(j jobs.Job) bool { return j.Kind == "charge" && j.Provider == "stripe" })},
		{"created after", jobs.JobQuery{CreatedAfter: t1}, where(func(j jobs.Job) bool { return !j.CreatedAt.Before(t1) })},
		{"created before", jobs.JobQuery{CreatedBefore: t1}, where(func(j jobs.Job) bool { return j.CreatedAt.Before(t1) })},
		{"all of them", jobs.JobQuery{Owner: "alice", Kind: "charge", States: []jobs.JobState{jobs.JobPending}, CreatedAfter: t1},
			where(func(j jobs.Job) bool {
				return j.Owner == "alice" && j.Kind == "charge" && j.State == jobs.JobPending && !j.CreatedAt.Before(t1)
			})},
		{"nothing", jobs.JobQuery{Owner: "nobody"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lister.ListJobs(e.ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("oldest first (-want +got):\n%s", diff)
			}
			q := tc.q
			q.Newest = true
			got, err = lister.ListJobs(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tc.want)
			slices.Reverse(want)
			if diff := cmp.Diff(want, ids(got)); diff != "" {
				t.Errorf("newest first (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		for _, newest := range []bool{false, true} {
			var seen []string
			after := ""
			for range len(all) + 1 {
				page, err := lister.ListJobs(e.ctx, jobs.JobQuery{Newest: newest, After: after, Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > 2 {
					t.Fatalf("a page of %d jobs, limit 2", len(page))
				}
				if len(page) == 0 {
					break
				}
				seen = append(seen, ids(page)...)
				after = page[len(page)-1].ID
			}
			want := where(func(jobs.Job) bool { return true })
			if newest {
				slices.Reverse(want)
			}
			if diff := cmp.Diff(want, seen); diff != "" {
				t.Errorf("pages, newest %v (-want +got):\n%s", newest, diff)
			}
		}
	})

	t.Run("a state that does not exist", func(t *testing.T) {
		_, err := lister.ListJobs(e.ctx, jobs.JobQuery{States: []jobs.JobState{"paused"}})
		var ie *jobs.InputError
		if !errors.As(err, &ie) || ie.Field != "States" {
			t.Errorf("ListJobs = %v; want an *InputError for States", err)
		}
	})
}
