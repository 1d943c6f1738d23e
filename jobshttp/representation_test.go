package jobshttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobshttp"
	"github.com/intentjobs/jobs/jobstest"
)

// slowLookup is a store whose next job lookup under a deadline (the kind
// Manager.Wait makes for Prefer: wait) reads the job, then delivers what it
// read only once its deadline has passed: the answer of a slow database,
// older than the moment it arrives. Lookups without a deadline are
// untouched.
type slowLookup struct {
	jobs.Store
	armed atomic.Bool
	read  chan struct{} // closed when the held lookup has read the job
}

func (s *slowLookup) Job(ctx context.Context, id string) (jobs.Job, error) {
	j, err := s.Store.Job(ctx, id)
	if _, deadline := ctx.Deadline(); deadline && s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-ctx.Done()
	}
	return j, err
}

// NotifyClosed passes the store's notifications on, so that Wait listens on
// PostgreSQL as it does in production.
func (s *slowLookup) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	if n, ok := s.Store.(jobs.CloseNotifier); ok {
		return n.NotifyClosed(ctx, jobID)
	}
	return nil, nil, errors.ErrUnsupported
}

// TestWaitAnswersTheJobAsItIsWhenAnswered: a reply to Prefer: wait shows the
// job as it is when the reply is written, not as Wait last read it. Here the
// job succeeds while the wait's lookup is slow to return "running"; the
// reply must say succeeded, at the version and with the ETag a GET gives.
func TestWaitAnswersTheJobAsItIsWhenAnswered(t *testing.T) {
	t.Parallel()
	for _, st := range stores {
		for _, method := range []string{"POST", "GET"} {
			t.Run(st.name+"/"+method, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				raw := st.open(t)
				slow := &slowLookup{Store: raw, read: make(chan struct{})}
				m := jobstest.NewManager(t, raw, jobs.Options{}) // the worker's, beside the handler's
				h := jobshttp.New(jobstest.NewManager(t, slow, jobs.Options{}), jobshttp.Options{Owner: bearerOwner})

				receipt := createJob(t, h, "fresh")
				a, err := m.StartAttempt(ctx, receipt.ID, "")
				if err != nil {
					t.Fatal(err)
				}

				slow.armed.Store(true)
				rq := request{key: "fresh", headers: map[string]string{"Prefer": "wait=1"}}
				if method == "GET" {
					rq = request{method: "GET", path: receipt.Href, headers: rq.headers}
				}
				answered := make(chan *httptest.ResponseRecorder)
				go func() { answered <- serve(h, rq) }()
				<-slow.read // the wait has read the job running
				if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{"printed":2}`)); err != nil {
					t.Fatal(err)
				}
				w := <-answered

				var v jobshttp.JobView
				if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code/100 != 2 {
					t.Fatalf("%s with wait: %d %s", method, w.Code, w.Body)
				}
				if v.State != jobs.JobSucceeded || v.Version != 2 || string(v.Result) != `{"printed":2}` {
					t.Errorf("%s with wait answered state %s at version %d: %s; want the succeeded job at version 2", method, v.State, v.Version, w.Body)
				}
				now := serve(h, request{method: "GET", path: receipt.Href})
				if etag := w.Header().Get("ETag"); etag == "" || etag != now.Header().Get("ETag") {
					t.Errorf("%s with wait: ETag %s; a GET now gives %s", method, etag, now.Header().Get("ETag"))
				}
			})
		}
	}
}

// TestJobViewETag: every JobView has an ETag that changes exactly when the
// view does; a GET or HEAD whose If-None-Match names it is answered 304
// without a body; and the views of a job's life are ordered as the package
// documents: each later view supersedes every earlier one, and nothing
// supersedes a terminal view.
func TestJobViewETag(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{})
		ctx := context.Background()
		receipt := createJob(t, e.h, "etag")
		if etag := serve(e.h, request{key: "etag"}).Header().Get("ETag"); etag != "" {
			t.Errorf("the receipt has ETag %s; it is no representation of the job's state", etag)
		}

		type seen struct {
			stage string
			etag  string
			view  jobshttp.JobView
		}
		var life []seen
		look := func(stage string) {
			t.Helper()
			w := serve(e.h, request{method: "GET", path: receipt.Href})
			var v jobshttp.JobView
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 200 {
				t.Fatalf("%s: GET %d %s", stage, w.Code, w.Body)
			}
			etag := w.Header().Get("ETag")
			if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
				t.Fatalf("%s: ETag %q; want a strong entity tag", stage, etag)
			}
			if cc := w.Header().Get("Cache-Control"); cc != "private, no-cache" {
				t.Errorf("%s: Cache-Control %q; want private, no-cache", stage, cc)
			}
			life = append(life, seen{stage, etag, v})
		}
		must := func(_ any, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}

		look("pending")
		a1, err := e.m.StartAttempt(ctx, receipt.ID, "")
		must(a1, err)
		look("running, attempt 1")
		must(e.m.MarkUnknown(ctx, a1.ID, "timeout"))
		look("attempt 1 in doubt")
		must(e.m.Fail(ctx, a1.ID, "declined"))
		look("attempt 1 failed")
		a2, err := e.m.StartAttempt(ctx, receipt.ID, "")
		must(a2, err)
		look("running, attempt 2")
		must(e.m.Complete(ctx, a2.ID, json.RawMessage(`"done"`)))
		look("succeeded")
		if _, err := e.m.CancelJob(ctx, receipt.ID, "too late"); !errors.Is(err, jobs.ErrJobClosed) {
			t.Fatalf("cancelling the succeeded job: %v; want ErrJobClosed", err)
		}
		look("after a refused cancel")

		for i, older := range life {
			for _, newer := range life[i+1:] {
				same := older.view.State == newer.view.State && older.view.Attempts == newer.view.Attempts && older.view.Version == newer.view.Version
				if same != (older.etag == newer.etag) {
					t.Errorf("%s → %s: ETag %s → %s, but the views are %s",
						older.stage, newer.stage, older.etag, newer.etag, map[bool]string{true: "the same", false: "different"}[same])
				}
				if got := newer.view.Supersedes(older.view); got != !same {
					t.Errorf("%s supersedes %s: %v; want %v", newer.stage, older.stage, got, !same)
				}
				if older.view.Supersedes(newer.view) {
					t.Errorf("%s supersedes the later %s", older.stage, newer.stage)
				}
			}
		}
		last := life[len(life)-1]
		if last.view.State != jobs.JobSucceeded || last.view.Version != 2 || last.view.Attempts != 2 {
			t.Fatalf("the job ends %+v; want succeeded at version 2 after 2 attempts", last.view)
		}

		for _, tc := range []struct {
			method, ifNoneMatch string
			status              int
		}{
			{"GET", last.etag, 304},
			{"HEAD", last.etag, 304},
			{"GET", "W/" + last.etag, 304},
			{"GET", `"other", ` + last.etag, 304},
			{"GET", "*", 304},
			{"GET", life[0].etag, 200},
			{"GET", `"other"`, 200},
			{"GET", last.etag[1 : len(last.etag)-1], 200}, // unquoted: not an entity tag
			{"HEAD", life[0].etag, 200},
		} {
			w := serve(e.h, request{method: tc.method, path: receipt.Href, headers: map[string]string{"If-None-Match": tc.ifNoneMatch}})
			if w.Code != tc.status || w.Header().Get("ETag") != last.etag {
				t.Errorf("%s If-None-Match %s: %d ETag %s; want %d ETag %s", tc.method, tc.ifNoneMatch, w.Code, w.Header().Get("ETag"), tc.status, last.etag)
			}
			if tc.status == 304 && w.Body.Len() != 0 {
				t.Errorf("%s If-None-Match %s: 304 with a body %q", tc.method, tc.ifNoneMatch, w.Body)
			}
		}
		// Another owner's conditional GET is a 404 like any other.
		if w := serve(e.h, request{method: "GET", path: receipt.Href, owner: "bob", headers: map[string]string{"If-None-Match": last.etag}}); w.Code != 404 {
			t.Errorf("bob's conditional GET: %d; want 404", w.Code)
		}
		// A POST that waits answers with the same view and ETag.
		w := serve(e.h, request{key: "etag", headers: map[string]string{"Prefer": "wait=1", "If-None-Match": last.etag}})
		if w.Code != 201 || w.Header().Get("ETag") != last.etag {
			t.Errorf("POST with wait: %d ETag %s; want 201 ETag %s", w.Code, w.Header().Get("ETag"), last.etag)
		}
	})
}

// TestSupersedes: the ordering rule on its own, including views a single
// life cannot show side by side.
func TestSupersedes(t *testing.T) {
	t.Parallel()
	view := func(id string, state jobs.JobState, version int64, attempts int) jobshttp.JobView {
		return jobshttp.JobView{ID: id, State: state, Version: version, Attempts: attempts}
	}
	for _, tc := range []struct {
		name     string
		new, old jobshttp.JobView
		want     bool
	}{
		{"running after pending", view("j", jobs.JobRunning, 1, 1), view("j", jobs.JobPending, 1, 0), true},
		{"second attempt", view("j", jobs.JobRunning, 1, 2), view("j", jobs.JobRunning, 1, 1), true},
		{"succeeded after running", view("j", jobs.JobSucceeded, 2, 1), view("j", jobs.JobRunning, 1, 1), true},
		{"cancelled while pending", view("j", jobs.JobCancelled, 2, 0), view("j", jobs.JobPending, 1, 0), true},
		{"running after succeeded", view("j", jobs.JobRunning, 1, 1), view("j", jobs.JobSucceeded, 2, 1), false},
		{"pending after running", view("j", jobs.JobPending, 1, 0), view("j", jobs.JobRunning, 1, 1), false},
		{"the same view", view("j", jobs.JobRunning, 1, 1), view("j", jobs.JobRunning, 1, 1), false},
		{"a terminal view again", view("j", jobs.JobSucceeded, 2, 1), view("j", jobs.JobSucceeded, 2, 1), false},
		{"another job", view("k", jobs.JobSucceeded, 2, 1), view("j", jobs.JobRunning, 1, 1), false},
	} {
		if got := tc.new.Supersedes(tc.old); got != tc.want {
			t.Errorf("%s: Supersedes = %v; want %v", tc.name, got, tc.want)
		}
	}
}

// lookupsFail is a store that writes but cannot read jobs by ID.
type lookupsFail struct{ jobs.Store }

func (lookupsFail) Job(context.Context, string) (jobs.Job, error) {
	return jobs.Job{}, &jobs.StorageError{Op: "job", Kind: jobs.StorageUnavailable, Message: "connection refused"}
}

// TestWaitWhenReadsFail: a POST that asked to wait but whose job cannot be
// read answers with the receipt, as without the preference (the job was
// created all the same), never with a state it did not read; a GET answers
// 503.
func TestWaitWhenReadsFail(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		raw := open(t)
		e := setup(t, func(testing.TB) jobs.SQLStore { return raw }, jobshttp.Options{})
		h := jobshttp.New(jobstest.NewManager(t, lookupsFail{raw}, jobs.Options{}), jobshttp.Options{Owner: bearerOwner, Logger: discardLogger})
		w := serve(h, request{key: "unread", headers: map[string]string{"Prefer": "wait=1"}})
		var r jobshttp.Receipt
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 201 || r.ID == "" ||
			w.Header().Get("Preference-Applied") != "" || w.Header().Get("ETag") != "" || strings.Contains(w.Body.String(), `"state"`) {
			t.Fatalf("POST with wait, reads failing: %d %v %s; want 201 with the receipt and no Preference-Applied", w.Code, w.Header(), w.Body)
		}
		if job, err := e.m.Get(context.Background(), r.ID); err != nil || job.Key != "unread" {
			t.Errorf("the job behind the receipt: %+v, %v", job, err)
		}
		g := serve(h, request{method: "GET", path: r.Href, headers: map[string]string{"Prefer": "wait=1"}})
		if g.Code != 503 || problemOf(t, g).Code != jobshttp.ProblemUnavailable {
			t.Errorf("GET with wait, reads failing: %d %s; want 503", g.Code, g.Body)
		}
	})
}
