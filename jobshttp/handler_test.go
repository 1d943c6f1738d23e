package jobshttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobshttp"
)

var stores = []struct {
	name string
	open func(testing.TB) jobs.SQLStore
}{
	{"SQLite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
	{"Postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
}

// forEachStore runs test on each store, in parallel.
func forEachStore(t *testing.T, test func(t *testing.T, open func(testing.TB) jobs.SQLStore)) {
	t.Parallel()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			test(t, st.open)
		})
	}
}

// bearerOwner is the tests' authentication: "Authorization: Bearer NAME"
// makes NAME the owner.
func bearerOwner(r *http.Request) (string, bool) {
	return strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
}

var discardLogger = slog.New(slog.DiscardHandler)

type env struct {
	store jobs.SQLStore
	m     *jobs.Manager
	h     *jobshttp.Handler
}

func setup(t *testing.T, open func(testing.TB) jobs.SQLStore, opts jobshttp.Options) env {
	t.Helper()
	s := open(t)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Owner == nil {
		opts.Owner = bearerOwner
	}
	if opts.Logger == nil {
		opts.Logger = discardLogger
	}
	return env{store: s, m: m, h: jobshttp.New(m, opts)}
}

// request describes one HTTP request; zero fields get the defaults of a
// well-formed POST by alice.
type request struct {
	method  string
	path    string
	owner   string // "" = alice; "-" = none
	key     string // header value; "" = "k1"; "-" = no header
	keys    []string
	ctype   string // "" = application/json; "-" = none
	body    string // "" = a print job
	headers map[string]string
}

const printBody = `{"kind":"print","provider":"laser","params":{"pages":2,"color":false}}`

func (rq request) build() *http.Request {
	method, path, body := rq.method, rq.path, rq.body
	if method == "" {
		method = http.MethodPost
	}
	if path == "" {
		path = "/jobs"
	}
	if body == "" && method == http.MethodPost {
		body = printBody
	}
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	switch rq.owner {
	case "":
		r.Header.Set("Authorization", "Bearer alice")
	case "-":
	default:
		r.Header.Set("Authorization", "Bearer "+rq.owner)
	}
	if method == http.MethodPost {
		switch {
		case rq.keys != nil:
			for _, k := range rq.keys {
				r.Header.Add("Idempotency-Key", k)
			}
		case rq.key == "":
			r.Header.Set("Idempotency-Key", "k1")
		case rq.key != "-":
			r.Header.Set("Idempotency-Key", rq.key)
		}
		switch rq.ctype {
		case "":
			r.Header.Set("Content-Type", "application/json")
		case "-":
		default:
			r.Header.Set("Content-Type", rq.ctype)
		}
	}
	for k, v := range rq.headers {
		r.Header.Set(k, v)
	}
	return r
}

func serve(h http.Handler, rq request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, rq.build())
	return w
}

// createJob POSTs a print job of alice's under key and returns its receipt.
func createJob(t *testing.T, h http.Handler, key string) jobshttp.Receipt {
	t.Helper()
	w := serve(h, request{key: key})
	var r jobshttp.Receipt
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", key, w.Code, w.Body)
	}
	return r
}

func problemOf(t *testing.T, w *httptest.ResponseRecorder) jobshttp.Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q; want application/problem+json (status %d, body %s)", ct, w.Code, w.Body)
	}
	var p jobshttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %s: %v", w.Body, err)
	}
	if p.Status != w.Code {
		t.Errorf("problem status %d, response status %d", p.Status, w.Code)
	}
	if p.Title == "" {
		t.Errorf("problem without title: %s", w.Body)
	}
	if p.Code == "" || p.Type != jobshttp.DefaultProblemBase+p.Code {
		t.Errorf("problem code %q, type %q; want a code, and the type %s followed by it", p.Code, p.Type, jobshttp.DefaultProblemBase)
	}
	return p
}

// errReader fails every read, as a connection does that breaks mid-body.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestStatuses(t *testing.T) {
	long := strings.Repeat("k", 256)
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{
			MaxBodyBytes: 512,
			Check: func(r *http.Request, req jobs.SubmitRequest) error {
				if req.Kind == "forbidden" {
					return errors.New("kind forbidden is not offered")
				}
				return nil
			},
		})
		// A job of alice's under key k1, which the cases replay or contradict.
		first := serve(e.h, request{})
		if first.Code != http.StatusCreated {
			t.Fatalf("first POST: %d %s", first.Code, first.Body)
		}
		var receipt jobshttp.Receipt
		if err := json.Unmarshal(first.Body.Bytes(), &receipt); err != nil {
			t.Fatal(err)
		}
		jobPath := "/jobs/" + receipt.ID

		titles := map[string]string{} // problem code → title: one title per type
		for _, tc := range []struct {
			name     string
			req      request
			status   int
			problem  string // want this problem type; "" = a success
			replayed bool
			header   [2]string // a header the response must have
		}{
			{name: "replay", req: request{}, status: 201, replayed: true},
			{name: "replay, quoted key", req: request{key: `"k1"`}, status: 201, replayed: true},
			{name: "replay, params reordered", req: request{body: `{"params":{"color":false,"pages":2},"provider":"laser","kind":"print"}`}, status: 201, replayed: true},
			{name: "replay, +json type", req: request{ctype: "application/vnd.api+json; charset=utf-8"}, status: 201, replayed: true},
			{name: "new key", req: request{key: "k2"}, status: 201, header: [2]string{"Idempotency-Key-Retention", "86400"}},
			{name: "255-byte key", req: request{key: long[:255]}, status: 201},
			{name: "quoted key with escapes", req: request{key: `"a \"b\" \\c"`}, status: 201},
			{name: "no params", req: request{key: "k3", body: `{"kind":"print","provider":"laser"}`}, status: 201},

			{name: "no owner", req: request{owner: "-"}, status: 401, problem: jobshttp.ProblemUnauthenticated, header: [2]string{"WWW-Authenticate", "Bearer"}},
			{name: "no key", req: request{key: "-"}, status: 400, problem: jobshttp.ProblemKeyMissing},
			{name: "empty key", req: request{keys: []string{""}}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "empty quoted key", req: request{key: `""`}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "256-byte key", req: request{key: long}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "256-byte quoted key", req: request{key: `"` + long + `"`}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "space in bare key", req: request{key: "a b"}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "non-ASCII key", req: request{key: "schlüssel"}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "control character in quoted key", req: request{key: "\"a\x01b\""}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "unterminated quoted key", req: request{key: `"abc`}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "bad escape", req: request{key: `"a\nb"`}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "text after quoted key", req: request{key: `"abc"d`}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "two keys", req: request{keys: []string{"k1", "k1"}}, status: 400, problem: jobshttp.ProblemKeyInvalid},
			{name: "text/plain", req: request{ctype: "text/plain"}, status: 415, problem: jobshttp.ProblemUnsupportedMediaType, header: [2]string{"Accept-Post", "application/json"}},
			{name: "no content type", req: request{ctype: "-"}, status: 415, problem: jobshttp.ProblemUnsupportedMediaType},
			{name: "form", req: request{ctype: "application/x-www-form-urlencoded", body: "kind=print"}, status: 415, problem: jobshttp.ProblemUnsupportedMediaType},
			{name: "malformed JSON", req: request{body: `{"kind":"print",`}, status: 400, problem: jobshttp.ProblemMalformedJSON},
			{name: "not an object", req: request{body: `[1,2]`}, status: 400, problem: jobshttp.ProblemMalformedJSON},
			{name: "unknown field", req: request{body: `{"kind":"print","provider":"laser","prams":{}}`}, status: 400, problem: jobshttp.ProblemMalformedJSON},
			{name: "trailing data", req: request{body: printBody + `{}`}, status: 400, problem: jobshttp.ProblemMalformedJSON},
			{name: "empty body", req: request{body: " "}, status: 400, problem: jobshttp.ProblemMalformedJSON},
			{name: "body too large", req: request{key: "big", body: `{"kind":"print","provider":"laser","params":"` + strings.Repeat("x", 600) + `"}`}, status: 413, problem: jobshttp.ProblemBodyTooLarge},
			{name: "conflict: other params", req: request{body: `{"kind":"print","provider":"laser","params":{"pages":3,"color":false}}`}, status: 422, problem: jobshttp.ProblemKeyConflict},
			{name: "conflict: other provider", req: request{body: `{"kind":"print","provider":"inkjet","params":{"pages":2,"color":false}}`}, status: 422, problem: jobshttp.ProblemKeyConflict},
			{name: "empty kind", req: request{key: "k4", body: `{"provider":"laser","params":{}}`}, status: 422, problem: jobshttp.ProblemInvalidRequest},
			{name: "refused by Check", req: request{key: "k5", body: `{"kind":"forbidden","provider":"laser"}`}, status: 422, problem: jobshttp.ProblemInvalidRequest},

			{name: "GET own job", req: request{method: "GET", path: jobPath}, status: 200},
			{name: "HEAD own job", req: request{method: "HEAD", path: jobPath}, status: 200},
			{name: "GET without owner", req: request{method: "GET", path: jobPath, owner: "-"}, status: 401, problem: jobshttp.ProblemUnauthenticated},
			{name: "GET another owner's job", req: request{method: "GET", path: jobPath, owner: "bob"}, status: 404, problem: jobshttp.ProblemNotFound},
			{name: "GET missing job", req: request{method: "GET", path: "/jobs/job_00000000000000000000000000"}, status: 404, problem: jobshttp.ProblemNotFound},
			{name: "GET nested path", req: request{method: "GET", path: jobPath + "/attempts"}, status: 404, problem: jobshttp.ProblemNotFound},
			{name: "GET elsewhere", req: request{method: "GET", path: "/other"}, status: 404, problem: jobshttp.ProblemNotFound},
			{name: "GET collection", req: request{method: "GET"}, status: 405, problem: jobshttp.ProblemMethodNotAllowed, header: [2]string{"Allow", "POST"}},
			{name: "DELETE job", req: request{method: "DELETE", path: jobPath}, status: 405, problem: jobshttp.ProblemMethodNotAllowed, header: [2]string{"Allow", "GET, HEAD"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := serve(e.h, tc.req)
				if w.Code != tc.status {
					t.Fatalf("status %d; want %d (body %s)", w.Code, tc.status, w.Body)
				}
				if got := w.Header().Get("Idempotent-Replayed") == "true"; got != tc.replayed {
					t.Errorf("Idempotent-Replayed: %v; want %v", got, tc.replayed)
				}
				if h := tc.header; h[0] != "" && w.Header().Get(h[0]) != h[1] {
					t.Errorf("%s: %q; want %q", h[0], w.Header().Get(h[0]), h[1])
				}
				if tc.problem != "" {
					p := problemOf(t, w)
					if p.Code != tc.problem {
						t.Errorf("problem code %q; want %q", p.Code, tc.problem)
					}
					if title, seen := titles[p.Code]; seen && title != p.Title {
						t.Errorf("problem %s titled %q here and %q elsewhere", p.Code, p.Title, title)
					}
					titles[p.Code] = p.Title
					return
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q; want application/json", ct)
				}
				if tc.replayed && !bytes.Equal(w.Body.Bytes(), first.Body.Bytes()) {
					t.Errorf("replay body\n%s\ndiffers from the first response\n%s", w.Body, first.Body)
				}
				if tc.status == 201 {
					var r jobshttp.Receipt
					if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || r.ID == "" {
						t.Fatalf("receipt %s: %v", w.Body, err)
					}
					if loc := w.Header().Get("Location"); loc != "/jobs/"+r.ID || r.Href != loc {
						t.Errorf("Location %q, href %q; want /jobs/%s", loc, r.Href, r.ID)
					}
				}
			})
		}

		t.Run("first response", func(t *testing.T) {
			if loc := first.Header().Get("Location"); loc != jobPath {
				t.Errorf("Location %q; want %q", loc, jobPath)
			}
			if first.Header().Get("Idempotent-Replayed") != "" {
				t.Error("the first response says Idempotent-Replayed")
			}
			if got := first.Header().Get("Idempotency-Key-Retention"); got != "86400" {
				t.Errorf("Idempotency-Key-Retention %q; want 86400", got)
			}
			want := `{"id":"` + receipt.ID + `","key":"k1","kind":"print","provider":"laser","params":{"color":false,"pages":2},"created_at":"`
			if !strings.HasPrefix(first.Body.String(), want) {
				t.Errorf("body %s; want it to start with %s", first.Body, want)
			}
		})

		t.Run("another owner's job is indistinguishable from a missing one", func(t *testing.T) {
			other := serve(e.h, request{method: "GET", path: jobPath, owner: "bob"})
			missing := serve(e.h, request{method: "GET", path: "/jobs/job_00000000000000000000000000", owner: "bob"})
			if other.Code != 404 || !bytes.Equal(other.Body.Bytes(), missing.Body.Bytes()) ||
				!reflect.DeepEqual(other.Header(), missing.Header()) {
				t.Errorf("other's job: %d %v %s\nmissing job: %d %v %s",
					other.Code, other.Header(), other.Body, missing.Code, missing.Header(), missing.Body)
			}
		})

		t.Run("conflict names the owner's own job", func(t *testing.T) {
			w := serve(e.h, request{body: `{"kind":"print","provider":"laser","params":{"pages":9}}`})
			if p := problemOf(t, w); p.Job != jobPath {
				t.Errorf("conflict problem names %q; want %q", p.Job, jobPath)
			}
		})

		t.Run("unreadable body", func(t *testing.T) {
			r := request{key: "unreadable"}.build()
			r.Body = io.NopCloser(io.MultiReader(strings.NewReader(`{"kind":`), errReader{}))
			r.ContentLength = -1
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			if p := problemOf(t, w); w.Code != 400 || p.Code != jobshttp.ProblemBodyUnreadable {
				t.Fatalf("%d %s; want 400 %s", w.Code, w.Body, jobshttp.ProblemBodyUnreadable)
			}
			if _, err := e.m.GetByKey(context.Background(), "alice", "unreadable"); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("an unreadable request wrote a job: %v", err)
			}
		})

		t.Run("chunked body too large", func(t *testing.T) {
			r := request{key: "chunked"}.build()
			r.Body = io.NopCloser(strings.NewReader(`{"kind":"print","provider":"laser","params":"` + strings.Repeat("y", 1000) + `"}`))
			r.ContentLength = -1
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			if w.Code != 413 {
				t.Fatalf("status %d; want 413", w.Code)
			}
			if _, err := e.m.GetByKey(context.Background(), "alice", "chunked"); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("a refused request wrote a job: %v", err)
			}
		})
	})
}

// TestKeyConflictStatus: a key reused with another request is 422
// Unprocessable Content by default, as the IETF draft says (409 tells
// generic clients that the first request is still being processed), and 409
// only when the host asks for it.
func TestKeyConflictStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		option, want int
	}{
		{0, http.StatusUnprocessableEntity},
		{http.StatusUnprocessableEntity, http.StatusUnprocessableEntity},
		{http.StatusConflict, http.StatusConflict},
	} {
		e := setup(t, stores[0].open, jobshttp.Options{ConflictStatus: tc.option})
		if w := serve(e.h, request{}); w.Code != 201 {
			t.Fatalf("first POST: %d %s", w.Code, w.Body)
		}
		w := serve(e.h, request{body: `{"kind":"print","provider":"laser","params":1}`})
		if w.Code != tc.want || problemOf(t, w).Type != jobshttp.DefaultProblemBase+jobshttp.ProblemKeyConflict {
			t.Errorf("ConflictStatus %d: conflict answered %d %s; want %d idempotency-key-conflict", tc.option, w.Code, w.Body, tc.want)
		}
	}
}

// TestConcurrentIdenticalPosts sends 64 identical requests at once, through
// a real server: one job, one 201, 63 replays, 64 identical bodies.
func TestConcurrentIdenticalPosts(t *testing.T) {
	const n = 64
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		var createdCalls sync.Map
		e := setup(t, open, jobshttp.Options{Created: func(_ context.Context, j jobs.Job) {
			createdCalls.Store(j.ID, true)
		}})
		srv := httptest.NewServer(e.h)
		defer srv.Close()
		client := srv.Client()
		client.Transport.(*http.Transport).MaxIdleConnsPerHost = n
		defer client.CloseIdleConnections()

		type result struct {
			status   int
			replayed bool
			body     []byte
			err      error
		}
		results := make([]result, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", srv.URL+"/jobs", strings.NewReader(printBody))
				req.Header.Set("Authorization", "Bearer alice")
				req.Header.Set("Idempotency-Key", `"double-click-1"`)
				req.Header.Set("Content-Type", "application/json")
				<-start
				resp, err := client.Do(req)
				if err != nil {
					results[i].err = err
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				results[i] = result{resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", body, err}
			}()
		}
		close(start)
		wg.Wait()

		fresh, replays := 0, 0
		for i, r := range results {
			if r.err != nil || r.status != http.StatusCreated {
				t.Fatalf("request %d: %d %s %v", i, r.status, r.body, r.err)
			}
			if r.replayed {
				replays++
			} else {
				fresh++
			}
			if !bytes.Equal(r.body, results[0].body) {
				t.Errorf("body %d\n%s\ndiffers from body 0\n%s", i, r.body, results[0].body)
			}
		}
		if fresh != 1 || replays != n-1 {
			t.Errorf("%d created, %d replayed; want 1 and %d", fresh, replays, n-1)
		}
		snap, err := invariant.TakeSnapshot(context.Background(), e.store)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Jobs) != 1 {
			t.Fatalf("%d jobs in the store; want 1", len(snap.Jobs))
		}
		var r jobshttp.Receipt
		json.Unmarshal(results[0].body, &r)
		if r.ID != snap.Jobs[0].ID {
			t.Errorf("responses name %s; the store holds %s", r.ID, snap.Jobs[0].ID)
		}
		calls := 0
		createdCalls.Range(func(any, any) bool { calls++; return true })
		if calls != 1 {
			t.Errorf("Created called for %d jobs; want 1", calls)
		}
	})
}

// TestConflictLeavesJobUnchanged: a mismatched payload under a used key is
// refused and the stored job stays exactly as it was.
func TestConflictLeavesJobUnchanged(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{})
		ctx := context.Background()
		if w := serve(e.h, request{key: "pay-1"}); w.Code != 201 {
			t.Fatalf("first POST: %d %s", w.Code, w.Body)
		}
		before, err := e.m.GetByKey(ctx, "alice", "pay-1")
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{
			`{"kind":"print","provider":"laser","params":{"pages":20,"color":false}}`,
			`{"kind":"scan","provider":"laser","params":{"pages":2,"color":false}}`,
			`{"kind":"print","provider":"laser","params":null}`,
		} {
			w := serve(e.h, request{key: "pay-1", body: body})
			if w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("mismatched POST %s: %d %s; want 422", body, w.Code, w.Body)
			}
			if w.Header().Get("Location") != "" || w.Header().Get("Idempotent-Replayed") != "" {
				t.Errorf("conflict carries Location or Idempotent-Replayed: %v", w.Header())
			}
		}
		after, err := e.m.GetByKey(ctx, "alice", "pay-1")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Errorf("job changed by refused requests:\nbefore %+v\nafter  %+v", before, after)
		}
		snap, err := invariant.TakeSnapshot(ctx, e.store)
		if err != nil || len(snap.Jobs) != 1 {
			t.Errorf("%d jobs after the conflicts (%v); want 1", len(snap.Jobs), err)
		}
	})
}

// TestOwnerIsolation: bob can neither read alice's job by its ID nor reach
// it through her key.
func TestOwnerIsolation(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{})
		ctx := context.Background()
		aliceResp := serve(e.h, request{owner: "alice", key: "shared-key"})
		var alice jobshttp.Receipt
		if err := json.Unmarshal(aliceResp.Body.Bytes(), &alice); err != nil || aliceResp.Code != 201 {
			t.Fatalf("alice's POST: %d %s", aliceResp.Code, aliceResp.Body)
		}
		aliceJob, _ := e.m.Get(ctx, alice.ID)

		if w := serve(e.h, request{method: "GET", path: "/jobs/" + alice.ID, owner: "bob"}); w.Code != 404 {
			t.Errorf("bob reads alice's job: %d %s", w.Code, w.Body)
		}
		for _, waitHdr := range []map[string]string{nil, {"Prefer": "wait=1"}} {
			if w := serve(e.h, request{method: "GET", path: "/jobs/" + alice.ID, owner: "bob", headers: waitHdr}); w.Code != 404 {
				t.Errorf("bob reads alice's job with %v: %d %s", waitHdr, w.Code, w.Body)
			}
		}

		// The same key and body from bob: his own, new job.
		w := serve(e.h, request{owner: "bob", key: "shared-key"})
		var bob jobshttp.Receipt
		json.Unmarshal(w.Body.Bytes(), &bob)
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || bob.ID == "" || bob.ID == alice.ID {
			t.Fatalf("bob's POST with alice's key: %d %v %s; want a new job of his own", w.Code, w.Header(), w.Body)
		}
		// The same key with another body from bob: a conflict with his
		// job, never a mention of hers.
		w = serve(e.h, request{owner: "bob", key: "shared-key", body: `{"kind":"print","provider":"laser","params":{"pages":99}}`})
		if w.Code != 422 || strings.Contains(w.Body.String(), alice.ID) || !strings.Contains(w.Body.String(), bob.ID) {
			t.Errorf("bob's conflict: %d %s; want 422 naming his job only", w.Code, w.Body)
		}
		if got, _ := e.m.Get(ctx, alice.ID); !reflect.DeepEqual(got, aliceJob) {
			t.Errorf("alice's job changed:\nbefore %+v\nafter  %+v", aliceJob, got)
		}
		// And alice still replays her own.
		if w := serve(e.h, request{owner: "alice", key: "shared-key"}); w.Header().Get("Idempotent-Replayed") != "true" ||
			!bytes.Equal(w.Body.Bytes(), aliceResp.Body.Bytes()) {
			t.Errorf("alice's replay: %d %s", w.Code, w.Body)
		}
	})
}

// TestPreferWait: Prefer: wait=N holds POST and GET until the job closes,
// or N seconds (capped) have passed.
func TestPreferWait(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		ctx := context.Background()
		var worker sync.WaitGroup
		defer worker.Wait()
		var e env
		e = setup(t, open, jobshttp.Options{
			MaxWait: 2 * time.Second,
			Created: func(ctx context.Context, j jobs.Job) {
				if j.Key != "work" {
					return
				}
				// A worker completes the job after the handler has
				// answered Created, while the POST waits.
				worker.Add(1)
				go func() {
					defer worker.Done()
					a, err := e.m.StartAttempt(ctx, j.ID, "")
					if err == nil {
						_, err = e.m.Complete(ctx, a.ID, json.RawMessage(`{"printed":2}`))
					}
					if err != nil {
						t.Errorf("worker: %v", err)
					}
				}()
			},
		})

		w := serve(e.h, request{key: "work", headers: map[string]string{"Prefer": "wait=10"}})
		var v jobshttp.JobView
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 201 {
			t.Fatalf("POST with wait: %d %s", w.Code, w.Body)
		}
		if v.State != jobs.JobSucceeded || string(v.Result) != `{"printed":2}` || v.ClosedAt == nil {
			t.Errorf("POST with wait answered %s; want the succeeded job", w.Body)
		}
		if got := w.Header().Get("Preference-Applied"); got != "wait=2" {
			t.Errorf("Preference-Applied %q; want wait=2 (capped)", got)
		}
		if got := w.Header().Get("Content-Location"); got != "/jobs/"+v.ID {
			t.Errorf("Content-Location %q", got)
		}

		// A replay with wait: same status line, replay header, the job as it is now.
		w = serve(e.h, request{key: "work", headers: map[string]string{"Prefer": "respond-async, wait=1"}})
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || !strings.Contains(w.Body.String(), `"state":"succeeded"`) {
			t.Errorf("replay with wait: %d %v %s", w.Code, w.Header(), w.Body)
		}

		// A job nobody works on: GET holds for the wait, then answers its state.
		idle := createJob(t, e.h, "idle")
		if _, err := e.m.StartAttempt(ctx, idle.ID, ""); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		w = serve(e.h, request{method: "GET", path: "/jobs/" + idle.ID, headers: map[string]string{"Prefer": "wait=1"}})
		held := time.Since(begin)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"state":"running"`) || w.Header().Get("Preference-Applied") != "wait=1" {
			t.Errorf("GET with wait: %d %v %s", w.Code, w.Header(), w.Body)
		}
		if held < time.Second || held > 5*time.Second {
			t.Errorf("GET with wait=1 held %v", held)
		}

		// Malformed or zero waits are ignored: no hold, no Preference-Applied.
		for _, pref := range []string{"wait=0", "wait=soon", "wait=-3", "return=minimal"} {
			begin := time.Now()
			w := serve(e.h, request{method: "GET", path: "/jobs/" + idle.ID, headers: map[string]string{"Prefer": pref}})
			if w.Code != 200 || w.Header().Get("Preference-Applied") != "" || time.Since(begin) > 500*time.Millisecond {
				t.Errorf("Prefer: %s: %d, Preference-Applied %q, took %v", pref, w.Code, w.Header().Get("Preference-Applied"), time.Since(begin))
			}
		}
	})
}

// failingStore answers every read and write with a storage error.
type failingStore struct {
	jobs.Store
	err error
}

func (f failingStore) CreateJob(context.Context, jobs.Job) (jobs.Job, bool, error) {
	return jobs.Job{}, false, f.err
}
func (f failingStore) Job(context.Context, string) (jobs.Job, error) { return jobs.Job{}, f.err }

func TestStoreErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   jobs.StorageKind
		status int
	}{
		{jobs.StorageBusy, 503},
		{jobs.StorageUnavailable, 503},
		{jobs.StorageFull, 500},
		{jobs.StorageOther, 500},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			m, err := jobs.New(failingStore{err: &jobs.StorageError{Op: "test", Kind: tc.kind, Message: "secret driver text"}}, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			h := jobshttp.New(m, jobshttp.Options{Owner: bearerOwner})
			for _, rq := range []request{{}, {method: "GET", path: "/jobs/job_x"}} {
				w := serve(h, rq)
				if w.Code != tc.status {
					t.Fatalf("%s: status %d; want %d", rq.method, w.Code, tc.status)
				}
				problemOf(t, w)
				if strings.Contains(w.Body.String(), "secret") {
					t.Errorf("the driver's message reached the client: %s", w.Body)
				}
				if (tc.status == 503) != (w.Header().Get("Retry-After") == "1") {
					t.Errorf("Retry-After %q with %d", w.Header().Get("Retry-After"), tc.status)
				}
			}
		})
	}
}

func TestNewPanics(t *testing.T) {
	t.Parallel()
	m, err := jobs.New(failingStore{}, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]jobshttp.Options{
		"no owner":    {},
		"status 400":  {Owner: bearerOwner, ConflictStatus: 400},
		"key reuse 9": {Owner: bearerOwner, KeyReuse: jobs.KeyReuse(9)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			jobshttp.New(m, opts)
		}()
	}
}

// TestReplayAfterProgress: a replay gets the first response's bytes even
// after the job has run and succeeded; its current state is at Location.
func TestReplayAfterProgress(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{})
		ctx := context.Background()
		first := serve(e.h, request{key: "progress"})
		loc := first.Header().Get("Location")
		job, err := e.m.GetByKey(ctx, "alice", "progress")
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.m.StartAttempt(ctx, job.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Complete(ctx, a.ID, json.RawMessage(`"ok"`)); err != nil {
			t.Fatal(err)
		}
		replay := serve(e.h, request{key: "progress"})
		if replay.Code != first.Code || !bytes.Equal(replay.Body.Bytes(), first.Body.Bytes()) ||
			replay.Header().Get("Location") != loc || replay.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay after success: %d %v %s\nfirst: %d %v %s",
				replay.Code, replay.Header(), replay.Body, first.Code, first.Header(), first.Body)
		}
		now := serve(e.h, request{method: "GET", path: loc})
		var v jobshttp.JobView
		if err := json.Unmarshal(now.Body.Bytes(), &v); err != nil || v.State != jobs.JobSucceeded || v.Attempts != 1 || string(v.Result) != `"ok"` {
			t.Errorf("GET %s: %d %s; want the succeeded job", loc, now.Code, now.Body)
		}
	})
}

// The retention header announces the Manager's retention unless set.
func TestRetentionHeaderFollowsManager(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		manager, handler time.Duration
		want             string
	}{
		{0, 0, "86400"},
		{2 * time.Hour, 0, "7200"},
		{2 * time.Hour, 30 * time.Minute, "1800"},
	} {
		m, err := jobs.New(testdb.NewSQLite(t), jobs.Options{Retention: tc.manager})
		if err != nil {
			t.Fatal(err)
		}
		h := jobshttp.New(m, jobshttp.Options{Owner: bearerOwner, KeyRetention: tc.handler})
		w := serve(h, request{key: "k1"})
		if w.Code != http.StatusCreated {
			t.Fatalf("POST = %d %s", w.Code, w.Body)
		}
		if got := w.Header().Get(jobshttp.HeaderKeyRetention); got != tc.want {
			t.Errorf("retention %v/%v: header %q, want %q", tc.manager, tc.handler, got, tc.want)
		}
	}
}

// TestInvalidOwnerIs401: an owner the jobs package cannot store (over 255
// bytes, not UTF-8, with a NUL) comes from the request's credentials, so it
// is answered like credentials that name nobody: 401 with the challenge and
// the owner-invalid code, on POST and GET alike, never 500, and nothing is
// written. The handler's verdict agrees with the Manager's own rule.
func TestInvalidOwnerIs401(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		e := setup(t, open, jobshttp.Options{})
		ctx := context.Background()
		alice := createJob(t, e.h, "alices")
		for _, tc := range []struct {
			name, owner string
			valid       bool
		}{
			{"255 bytes", strings.Repeat("o", 255), true},
			{"255 bytes of UTF-8", strings.Repeat("ö", 127) + "o", true},
			{"256 bytes", strings.Repeat("o", 256), false},
			{"300-byte token", strings.Repeat("t", 300), false},
			{"not UTF-8", "bob\xff", false},
			{"NUL", "bob\x00", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.m.GetByKey(ctx, tc.owner, "k")
				if managerValid := !errors.Is(err, jobs.ErrInvalidInput); managerValid != tc.valid {
					t.Fatalf("the Manager says valid=%v (%v); the case says %v", managerValid, err, tc.valid)
				}
				for _, rq := range []request{
					{method: "POST", owner: tc.owner, key: "owner-check"},
					{method: "GET", path: alice.Href, owner: tc.owner},
				} {
					w := serve(e.h, rq)
					if tc.valid {
						if w.Code == 401 || w.Code >= 500 {
							t.Errorf("%s: %d %s; want the owner accepted", rq.method, w.Code, w.Body)
						}
						continue
					}
					if w.Code != http.StatusUnauthorized {
						t.Fatalf("%s: %d %s; want 401", rq.method, w.Code, w.Body)
					}
					if p := problemOf(t, w); p.Code != jobshttp.ProblemOwnerInvalid || w.Header().Get("WWW-Authenticate") != "Bearer" {
						t.Errorf("%s: code %q, WWW-Authenticate %q; want %s and Bearer", rq.method, p.Code, w.Header().Get("WWW-Authenticate"), jobshttp.ProblemOwnerInvalid)
					}
				}
			})
		}
		snap, err := invariant.TakeSnapshot(ctx, e.store)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range snap.Jobs {
			if !utf8.ValidString(j.Owner) || len(j.Owner) > 255 || strings.ContainsRune(j.Owner, 0) {
				t.Errorf("a job was written for the refused owner %q", j.Owner)
			}
		}
		if len(snap.Jobs) != 3 { // alice's, and one each for the two valid owners
			t.Errorf("%d jobs in the store; want 3", len(snap.Jobs))
		}
	})
}

// TestReplayIsNotCheckedAgain: a request whose key already has its job is
// never put through Options.Check again, so a client whose request passed
// the rules of its day still gets its job after the rules change: replays
// are answered as replays, a reused key as a key conflict, and only new
// keys meet the new rules.
func TestReplayIsNotCheckedAgain(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func(testing.TB) jobs.SQLStore) {
		var refuse atomic.Bool
		var checks atomic.Int32
		e := setup(t, open, jobshttp.Options{
			Check: func(r *http.Request, req jobs.SubmitRequest) error {
				checks.Add(1)
				if refuse.Load() {
					return errors.New("printing is suspended")
				}
				return nil
			},
		})
		first := serve(e.h, request{key: "before"})
		if first.Code != 201 || checks.Load() != 1 {
			t.Fatalf("first POST: %d %s after %d checks; want 201 after 1", first.Code, first.Body, checks.Load())
		}
		refuse.Store(true) // the rules change

		for _, tc := range []struct {
			name   string
			req    request
			status int
			code   string // the problem's; "" = a replay
			checks int32  // Check calls so far
		}{
			{"replay", request{key: "before"}, 201, "", 1},
			{"replay waiting", request{key: "before", headers: map[string]string{"Prefer": "wait=1"}}, 201, "", 1},
			{"reused key, other params", request{key: "before", body: `{"kind":"print","provider":"laser","params":{"pages":7}}`}, 422, jobshttp.ProblemKeyConflict, 1},
			{"new key", request{key: "after"}, 422, jobshttp.ProblemInvalidRequest, 2},
		} {
			w := serve(e.h, tc.req)
			if w.Code != tc.status || checks.Load() != tc.checks {
				t.Fatalf("%s: %d %s after %d checks; want %d after %d", tc.name, w.Code, w.Body, checks.Load(), tc.status, tc.checks)
			}
			if tc.code != "" {
				if p := problemOf(t, w); p.Code != tc.code {
					t.Errorf("%s: problem %q; want %q", tc.name, p.Code, tc.code)
				}
				continue
			}
			if w.Header().Get("Idempotent-Replayed") != "true" || w.Header().Get("Location") != first.Header().Get("Location") {
				t.Errorf("%s: %v %s; want a replay of %s", tc.name, w.Header(), w.Body, first.Header().Get("Location"))
			}
		}
		if _, err := e.m.GetByKey(context.Background(), "alice", "after"); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("the refused new key wrote a job: %v", err)
		}
	})
}
