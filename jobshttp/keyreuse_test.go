package jobshttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobshttp"
)

// TestKeyReuse: with Options.KeyReuse, a POST repeated after its job failed
// (or was cancelled, as the policy says) creates a new job under the same
// Idempotency-Key; without it, or for a job that did not fail, it is a
// replay; with other params it is a conflict whatever the policy.
func TestKeyReuse(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		for _, tc := range []struct {
			name   string
			reuse  jobs.KeyReuse
			cancel bool // cancel the first job instead of failing it
			body   string
			status int
			code   string // the problem's
			new    bool   // a new job, not a replay
		}{
			{"never", jobs.KeyReuseNever, false, "", 201, "", false},
			{"after failure", jobs.KeyReuseAfterFailure, false, "", 201, "", true},
			{"after failure, cancelled", jobs.KeyReuseAfterFailure, true, "", 201, "", false},
			{"after failure or cancel, cancelled", jobs.KeyReuseAfterFailureOrCancel, true, "", 201, "", true},
			{"after failure, other params", jobs.KeyReuseAfterFailure, false,
				`{"kind":"print","provider":"laser","params":{"pages":7}}`, 422, jobshttp.ProblemKeyConflict, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				var created, checks atomic.Int32
				e := setup(t, open, jobshttp.Options{
					KeyReuse: tc.reuse,
					Created:  func(context.Context, jobs.Job) { created.Add(1) },
					Check:    func(*http.Request, jobs.SubmitRequest) error { checks.Add(1); return nil },
				})
				ctx := context.Background()
				first := createJob(t, e.h, "k")
				var err error
				if tc.cancel {
					_, err = e.m.CancelJob(ctx, first.ID, "stop")
				} else {
					_, err = e.m.FailJob(ctx, first.ID, "gave up")
				}
				if err != nil {
					t.Fatal(err)
				}

				w := serve(e.h, request{key: "k", body: tc.body})
				if w.Code != tc.status {
					t.Fatalf("POST after the job ended: %d %s; want %d", w.Code, w.Body, tc.status)
				}
				if tc.code != "" {
					if p := problemOf(t, w); p.Code != tc.code {
						t.Errorf("problem %q; want %q", p.Code, tc.code)
					}
				}
				loc := w.Header().Get("Location")
				replayed := w.Header().Get(jobshttp.HeaderReplayed) == "true"
				byKey, err := e.m.GetByKey(ctx, "alice", "k")
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.code != "":
					if byKey.ID != first.ID || created.Load() != 1 {
						t.Errorf("a conflict changed the key's job to %s, or created one (%d)", byKey.ID, created.Load())
					}
				case tc.new:
					if replayed || loc == first.Href || byKey.ID == first.ID || loc != "/jobs/"+byKey.ID || created.Load() != 2 || checks.Load() != 2 {
						t.Errorf("POST = %v; Location %s, key's job %s, %d created, %d checks; want a new job, created and checked",
							w.Header(), loc, byKey.ID, created.Load(), checks.Load())
					}
					// The next repeat is a replay of the new job.
					again := serve(e.h, request{key: "k"})
					if again.Code != 201 || again.Header().Get(jobshttp.HeaderReplayed) != "true" || again.Header().Get("Location") != loc {
						t.Errorf("repeat after the reuse: %d %v; want a replay of %s", again.Code, again.Header(), loc)
					}
					// The old job is still at its location, as it ended.
					old := serve(e.h, request{method: "GET", path: first.Href})
					var v jobshttp.JobView
					if err := json.Unmarshal(old.Body.Bytes(), &v); err != nil || v.ID != first.ID || !v.State.Terminal() || v.Key != "k" {
						t.Errorf("GET %s: %d %s; want the ended job", first.Href, old.Code, old.Body)
					}
				default:
					if !replayed || loc != first.Href || byKey.ID != first.ID || created.Load() != 1 || checks.Load() != 1 {
						t.Errorf("POST = %v; Location %s, %d created, %d checks; want a replay of %s, unchecked", w.Header(), loc, created.Load(), checks.Load(), first.Href)
					}
				}
			})
		}
	})
}

// TestKeyReuseRefusedByCheck: a request that would replace a failed job
// is vetted by Check like a new one, and a refusal writes nothing.
func TestKeyReuseRefusedByCheck(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		var refuse atomic.Bool
		e := setup(t, open, jobshttp.Options{
			KeyReuse: jobs.KeyReuseAfterFailure,
			Check: func(*http.Request, jobs.SubmitRequest) error {
				if refuse.Load() {
					return errors.New("printing is suspended")
				}
				return nil
			},
		})
		ctx := context.Background()
		first := createJob(t, e.h, "k")
		if _, err := e.m.FailJob(ctx, first.ID, "gave up"); err != nil {
			t.Fatal(err)
		}
		refuse.Store(true)
		w := serve(e.h, request{key: "k"})
		if p := problemOf(t, w); w.Code != 422 || p.Code != jobshttp.ProblemInvalidRequest {
			t.Fatalf("POST: %d %s; want 422 %s", w.Code, w.Body, jobshttp.ProblemInvalidRequest)
		}
		if j, err := e.m.GetByKey(ctx, "alice", "k"); err != nil || j.ID != first.ID || j.ReplacedBy != "" {
			t.Errorf("GetByKey = %s (replaced by %q), %v; want the failed job %s, still holding its key", j.ID, j.ReplacedBy, err, first.ID)
		}
	})
}
