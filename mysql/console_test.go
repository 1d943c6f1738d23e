package mysql_test

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
	"github.com/intentjobs/jobs/jobstest"
)

// lookupProvider answers every lookup of an attempt as told, by attempt.
type lookupProvider struct {
	mu      sync.Mutex
	answers map[string]error // nil: pending
}

func (p *lookupProvider) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, errors.New("not called in these tests")
}

func (p *lookupProvider) Lookup(_ context.Context, a jobs.Attempt) (failover.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.answers[a.ID]; err != nil {
		return failover.Outcome{}, err
	}
	return failover.Outcome{State: failover.OutcomePending}, nil
}

// consoleClient sends requests to a console as the user named (a header
// that the test's Authorize reads as "name:role").
type consoleClient struct{ h http.Handler }

type consoleResponse struct {
	code     int
	body     string
	location string
}

func (c consoleClient) send(t *testing.T, r *http.Request, user string) consoleResponse {
	t.Helper()
	r.Header.Set("X-User", user)
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	b, err := io.ReadAll(w.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return consoleResponse{w.Code, string(b), w.Result().Header.Get("Location")}
}

func (c consoleClient) get(t *testing.T, user, path string) consoleResponse {
	t.Helper()
	return c.send(t, httptest.NewRequest("GET", path, nil), user)
}

func (c consoleClient) post(t *testing.T, user string, form url.Values) consoleResponse {
	t.Helper()
	r := httptest.NewRequest("POST", "/console/actions", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return c.send(t, r, user)
}

func (r consoleResponse) want(t *testing.T, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d; body:\n%s", r.code, code, r.body)
	}
	for _, c := range contains {
		if !strings.Contains(r.body, c) {
			t.Errorf("the page lacks %q:\n%s", c, r.body)
		}
	}
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`)

func consoleAuthorize(r *http.Request) (console.Principal, error) {
	name, role, ok := strings.Cut(r.Header.Get("X-User"), ":")
	switch {
	case !ok:
		return console.Principal{}, console.ErrUnauthenticated
	case role == "operator":
		return console.Principal{Actor: name, Role: console.RoleOperator}, nil
	}
	return console.Principal{Actor: name, Role: console.RoleViewer}, nil
}

// The operator's console over a Manager on MySQL: it finds a job by its
// provider's reference and by its owner and key, lists the attempts in
// doubt with the lookups the reconciler recorded (the one whose provider
// cannot look it up first), counts, and resolves an attempt in doubt once
// when the confirmed form is sent many times at once.
func TestConsole(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	clock := jobstest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	m := jobstest.NewManager(t, s, jobs.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler),
		Contracts: map[string]jobs.Contract{"charge": {Version: "v1", Validate: func(r json.RawMessage) error {
			var v struct{ ID string }
			if json.Unmarshal(r, &v) != nil || v.ID == "" {
				return errors.New(`the result has no "id"`)
			}
			return nil
		}}}})
	prov := &lookupProvider{answers: map[string]error{}}
	rec := &failover.Reconciler{Manager: m, Providers: map[string]failover.Provider{"acme": prov}, Logger: slog.New(slog.DiscardHandler)}
	h, err := console.New(console.Options{Manager: m, Authorize: consoleAuthorize, Prefix: "/console", Reconciler: rec,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c := consoleClient{h}
	ctx := t.Context()

	// Two jobs whose attempts timed out, after their provider acknowledged
	// them.
	inDoubt := func(key, ref string) (jobs.Job, jobs.Attempt) {
		clock.Advance(time.Millisecond)
		j, _, err := m.Submit(ctx, charge("alice", key))
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.MarkRunning(ctx, a.ID, ref); err != nil {
			t.Fatal(err)
		}
		if a, err = m.MarkUnknown(ctx, a.ID, "timed out after 30s"); err != nil {
			t.Fatal(err)
		}
		return j, a
	}
	j1, a1 := inDoubt("order-7", "ch_3Nx")
	_, a2 := inDoubt("order-8", "ch_4Qy")
	clock.Advance(time.Minute)
	prov.answers[a2.ID] = failover.ErrLookupUnsupported
	for _, a := range []jobs.Attempt{a1, a2} {
		if _, err := rec.ReconcileAttempt(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)

	// Finding the job.
	page := "/console/jobs/" + j1.ID
	for q, want := range map[string]string{
		"/console/search?q=ch_3Nx":                page + "#" + a1.ID,
		"/console/search?q=" + a1.ID:              page + "#" + a1.ID,
		"/console/search?q=" + j1.ID:              page,
		"/console/search?owner=alice&key=order-7": page,
	} {
		if r := c.get(t, "val:viewer", q); r.code != http.StatusSeeOther || r.location != want {
			t.Errorf("GET %s = %d to %q, want 303 to %q", q, r.code, r.location, want)
		}
	}
	c.get(t, "val:viewer", "/console/search?q=ch_nothing").want(t, 200, "Nothing found")
	c.get(t, "val:viewer", page).want(t, 200, "provider reference ch_3Nx", "attempt 1 timed out: in doubt",
		"the provider answered: pending")

	// The queue of attempts in doubt, with the lookups recorded.
	r := c.get(t, "olga:operator", "/console/in-doubt")
	r.want(t, 200, a1.ID, a2.ID, "1m00s ago: pending", "needs an operator", "unsupported:",
		"action=resolve&amp;outcome=succeeded&amp;job="+j1.ID+"&amp;attempt="+a1.ID)
	if strings.Index(r.body, a2.ID) > strings.Index(r.body, a1.ID) {
		t.Errorf("the attempt that needs an operator is not first:\n%s", r.body)
	}
	c.get(t, "val:viewer", "/console/?state=running&count=1").want(t, 200, "2 jobs match", j1.ID)

	// The resolution, confirmed, sent eight times at once.
	confirm := c.get(t, "olga:operator", "/console/confirm?action=resolve&outcome=succeeded&job="+j1.ID+"&attempt="+a1.ID)
	confirm.want(t, 200)
	form := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(confirm.body, -1) {
		form.Set(m[1], m[2])
	}
	if form.Get("key") == "" {
		t.Fatalf("no form on the confirmation page:\n%s", confirm.body)
	}
	form.Set("reason", "the provider's dashboard shows charge ch_3Nx captured")
	form.Set("result", `{"id":"ch_3Nx","amount":1200}`)
	const n = 8
	answers := make([]consoleResponse, n)
	release(n, func(i int) { answers[i] = c.post(t, "olga:operator", form) })

	records, err := s.ListJobs(ctx, jobs.JobQuery{Owner: "console/" + j1.ID})
	if err != nil || len(records) != 1 {
		t.Fatalf("the action's records: %+v, %v; want one", records, err)
	}
	for _, r := range answers {
		if r.code != http.StatusSeeOther || r.location != page+"?action="+records[0].ID {
			t.Errorf("POST = %d to %q; want 303 to the job's page with the action", r.code, r.location)
		}
	}
	got, err := m.Get(ctx, j1.ID)
	if err != nil || got.State != jobs.JobSucceeded || got.CompletedBy != a1.ID {
		t.Fatalf("the job after the resolution: %+v, %v", got, err)
	}
	if atts, err := m.Attempts(ctx, j1.ID); err != nil || len(atts) != 1 || atts[0].State != jobs.AttemptSucceeded {
		t.Fatalf("the job's attempts after the resolution: %+v, %v", atts, err)
	}
	c.get(t, "val:viewer", page+"?action="+records[0].ID).want(t, 200, "Done.",
		"operator olga: resolve attempt "+a1.ID+" as succeeded", "dashboard shows charge ch_3Nx")
	r = c.get(t, "olga:operator", "/console/in-doubt")
	r.want(t, 200, a2.ID)
	if strings.Contains(r.body, a1.ID) {
		t.Errorf("the resolved attempt is still in the queue")
	}
}
