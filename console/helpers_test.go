package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

var stores = []struct {
	name string
	open func(t testing.TB) jobs.Store
}{
	{"memstore", func(testing.TB) jobs.Store { return memstore.New() }},
	{"sqlite", func(t testing.TB) jobs.Store { return testdb.NewSQLite(t) }},
	{"postgres", func(t testing.TB) jobs.Store { return testdb.NewPostgres(t) }},
}

// events records the events of a Manager.
type events struct {
	mu  sync.Mutex
	all []jobs.Event
}

func (e *events) Observe(_ context.Context, ev jobs.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) of(typ jobs.EventType) []jobs.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []jobs.Event
	for _, ev := range e.all {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// env is a console over a Manager, with test users: the request header
// X-User names one, as "name:role[:owner,owner]".
type env struct {
	ctx   context.Context
	clock *jobstest.Clock
	m     *jobs.Manager
	ev    *events
	h     *console.Handler
	rec   *failover.Reconciler
	prov  *scriptedProvider
}

func authorize(r *http.Request) (console.Principal, error) {
	u := r.Header.Get("X-User")
	if u == "" {
		return console.Principal{}, console.ErrUnauthenticated
	}
	parts := strings.Split(u, ":")
	p := console.Principal{Actor: parts[0]}
	switch parts[1] {
	case "operator":
		p.Role = console.RoleOperator
	case "viewer":
		p.Role = console.RoleViewer
	case "banned":
		return console.Principal{}, errors.New("banned")
	}
	if len(parts) > 2 {
		p.Owners = strings.Split(parts[2], ",")
	}
	return p, nil
}

func forEachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, sc.open(t)))
		})
	}
}

func newEnv(t *testing.T, s jobs.Store) *env {
	t.Helper()
	clock := jobstest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	ev := &events{}
	m := jobstest.NewManager(t, s, jobs.Options{Clock: clock, Observer: ev, Logger: slog.New(slog.DiscardHandler),
		Contracts: map[string]jobs.Contract{"charge": {Version: "v1", Validate: func(r json.RawMessage) error {
			var v struct{ ID string }
			if json.Unmarshal(r, &v) != nil || v.ID == "" {
				return errors.New(`the result has no "id"`)
			}
			return nil
		}}}})
	prov := &scriptedProvider{}
	rec := &failover.Reconciler{Manager: m, Providers: map[string]failover.Provider{"stripe": prov}, Logger: slog.New(slog.DiscardHandler)}
	h, err := console.New(console.Options{Manager: m, Authorize: authorize, Prefix: "/console", Reconciler: rec,
		LiveEvery: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Redact: func(kind, field string, v json.RawMessage) json.RawMessage {
			var obj map[string]any
			if json.Unmarshal(v, &obj) != nil {
				return v
			}
			if _, ok := obj["card"]; ok {
				obj["card"] = "[redacted]"
			}
			out, _ := json.Marshal(obj)
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{ctx: context.Background(), clock: clock, m: m, ev: ev, h: h, rec: rec, prov: prov}
}

// scriptedProvider answers lookups as told.
type scriptedProvider struct {
	mu      sync.Mutex
	outcome *failover.Outcome
	err     error
}

func (p *scriptedProvider) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, errors.New("not called in these tests")
}

func (p *scriptedProvider) Lookup(context.Context, jobs.Attempt) (failover.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outcome == nil {
		return failover.Outcome{}, p.err
	}
	return *p.outcome, nil
}

func (p *scriptedProvider) answer(o *failover.Outcome, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.outcome, p.err = o, err
}

type response struct {
	code int
	body string
	hdr  http.Header
}

// get requests path as user ("" for nobody).
func (e *env) get(t *testing.T, user, path string) response {
	t.Helper()
	return e.do(t, httptest.NewRequest("GET", path, nil), user)
}

func (e *env) do(t *testing.T, r *http.Request, user string) response {
	t.Helper()
	if user != "" {
		r.Header.Set("X-User", user)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return response{w.Code, string(b), w.Result().Header}
}

// post sends form to /console/actions as user, from the console's origin.
func (e *env) post(t *testing.T, user string, form url.Values) response {
	t.Helper()
	r := httptest.NewRequest("POST", "/console/actions", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return e.do(t, r, user)
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

// confirmForm reads the form of the confirmation page at path, as user.
func (e *env) confirmForm(t *testing.T, user, path string) url.Values {
	t.Helper()
	r := e.get(t, user, path)
	if r.code != 200 {
		t.Fatalf("GET %s = %d:\n%s", path, r.code, r.body)
	}
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(r.body, -1) {
		form.Set(m[1], m[2])
	}
	if form.Get("key") == "" {
		t.Fatalf("no form on %s:\n%s", path, r.body)
	}
	return form
}

func (e *env) submit(t *testing.T, owner, key string) jobs.Job {
	t.Helper()
	e.clock.Advance(time.Millisecond)
	j, _, err := e.m.Submit(e.ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "stripe",
		Params: json.RawMessage(`{"amount":1200,"card":"4242424242424242"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// unknownAttempt submits a job whose first attempt is in doubt.
func (e *env) unknownAttempt(t *testing.T, owner, key string) (jobs.Job, jobs.Attempt) {
	t.Helper()
	j := e.submit(t, owner, key)
	a, err := e.m.StartAttempt(e.ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = e.m.MarkUnknown(e.ctx, a.ID, "timed out after 30s"); err != nil {
		t.Fatal(err)
	}
	return j, a
}

func (r response) want(t *testing.T, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("status %d, want %d; body:\n%s", r.code, code, r.body)
		return
	}
	for _, c := range contains {
		if !strings.Contains(r.body, c) {
			t.Errorf("the page lacks %q:\n%s", c, r.body)
		}
	}
}

// crossSite is a POST of form to the console from another site.
func crossSite(form url.Values) *http.Request {
	r := httptest.NewRequest("POST", "/console/actions", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	return r
}
