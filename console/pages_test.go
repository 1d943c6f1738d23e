package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/memstore"
)

func TestNewRequiresManagerAndAuthorization(t *testing.T) {
	t.Parallel()
	m, err := jobs.New(memstore.New(), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(*http.Request) (console.Principal, error) { return console.Principal{}, nil }
	for _, tc := range []struct {
		name string
		o    console.Options
		want error
	}{
		{"no manager", console.Options{Authorize: auth}, console.ErrNoManager},
		{"no authorization", console.Options{Manager: m}, console.ErrNoAuthorize},
		{"prefix with a trailing slash", console.Options{Manager: m, Authorize: auth, Prefix: "/console/"}, jobs.ErrInvalidInput},
		{"relative prefix", console.Options{Manager: m, Authorize: auth, Prefix: "console"}, jobs.ErrInvalidInput},
	} {
		if h, err := console.New(tc.o); !errors.Is(err, tc.want) || h != nil {
			t.Errorf("%s: New = %v, %v; want %v", tc.name, h, err, tc.want)
		}
	}
}

// Every page asks who is there; nobody gets 401, a refused or roleless
// user 403; a viewer reads but takes no action. Every answer carries the
// strict policy, and no page has inline script or style.
func TestAuthorizationAndHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memstore.New())
	j, a := e.unknownAttempt(t, "alice", "k1")
	pages := []string{"/console/", "/console/jobs/" + j.ID, "/console/in-doubt", "/console/providers", "/console/search?q=" + j.ID}
	for _, p := range pages {
		e.get(t, "", p).want(t, 401, "Sign in")
		e.get(t, "mallory:banned", p).want(t, 403)
		e.get(t, "eve:none", p).want(t, 403)
		r := e.get(t, "val:viewer", p)
		if r.code != 200 && r.code != 303 {
			t.Errorf("viewer GET %s = %d", p, r.code)
		}
		csp := r.hdr.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, "style=") || strings.Contains(r.body, " on") && strings.Contains(r.body, "onclick") {
			t.Errorf("GET %s has inline script or style:\n%s", p, r.body)
		}
	}
	confirm := "/console/confirm?action=resolve&outcome=failed&job=" + j.ID + "&attempt=" + a.ID
	e.get(t, "val:viewer", confirm).want(t, 403, "Only operators")
	form := e.confirmForm(t, "olga:operator", confirm)
	form.Set("reason", "the provider says so")
	e.post(t, "val:viewer", form).want(t, 403, "Only operators")
	if got, _ := e.m.Attempt(e.ctx, a.ID); got.State != jobs.AttemptUnknown {
		t.Errorf("a viewer's action changed the attempt: %s", got.State)
	}
	r := e.get(t, "", "/console/assets/console.js")
	if r.code != 200 || !strings.Contains(r.body, "EventSource") {
		t.Errorf("the script: %d", r.code)
	}
	e.get(t, "val:viewer", "/console/nowhere").want(t, 404)
}

// A job, an attempt, a provider reference, an owner and key each find the
// job's page; what finds nothing says so.
func TestSearch(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j := e.submit(t, "alice", "order-7")
		a, err := e.m.StartAttempt(e.ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.MarkRunning(e.ctx, a.ID, "ch_3Nx"); err != nil {
			t.Fatal(err)
		}
		page := "/console/jobs/" + j.ID
		for q, want := range map[string]string{
			"/console/search?q=" + j.ID:                 page,
			"/console/search?q=" + a.ID:                 page + "#" + a.ID,
			"/console/search?q=ch_3Nx":                  page + "#" + a.ID,
			"/console/search?owner=alice&key=order-7":   page,
			"/console/search?q=+" + j.ID + "+":          page,
			"/console/search?owner=alice&key=order-404": "",
			"/console/search?q=ch_nothing":              "",
		} {
			r := e.get(t, "val:viewer", q)
			if want == "" {
				r.want(t, 200, "Nothing found")
				continue
			}
			if r.code != 303 || r.hdr.Get("Location") != want {
				t.Errorf("GET %s = %d to %q, want 303 to %q", q, r.code, r.hdr.Get("Location"), want)
			}
		}
		e.get(t, "val:viewer", "/console/search?owner=alice").want(t, 400, "both the owner and the key")
		// Another tenant's operator finds nothing of alice's.
		e.get(t, "bob:operator:bob", "/console/search?q="+j.ID).want(t, 200, "Nothing found")
		e.get(t, "bob:operator:bob", page).want(t, 404)
	})
}

// The list filters by state, kind, provider, owner and age, pages by
// keyset, and counts on demand; scoped actors see their owners only.
func TestList(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		var ids []string
		for i, owner := range []string{"alice", "bob", "alice", "alice"} {
			ids = append(ids, e.submit(t, owner, "k"+string(rune('0'+i))).ID)
		}
		r := e.get(t, "val:viewer", "/console/?owner=alice&limit=2")
		r.want(t, 200, ids[3], ids[2], "Next page")
		if strings.Contains(r.body, ids[0]) {
			t.Errorf("the first page of 2 shows a third job")
		}
		e.get(t, "val:viewer", "/console/?owner=alice&limit=2&after="+ids[2]).want(t, 200, ids[0], "First page")
		e.get(t, "val:viewer", "/console/?state=pending&count=1").want(t, 200, "4 jobs match")
		e.get(t, "val:viewer", "/console/?state=running").want(t, 200, "No job matches")
		e.get(t, "val:viewer", "/console/?older-than=1h").want(t, 200, "No job matches")
		e.get(t, "val:viewer", "/console/?state=sleeping").want(t, 400, "none of pending")
		r = e.get(t, "bob:viewer:bob", "/console/")
		r.want(t, 200, ids[1])
		if strings.Contains(r.body, ids[0]) {
			t.Errorf("bob sees alice's jobs")
		}
		e.get(t, "bob:viewer:bob", "/console/?owner=alice").want(t, 404)
	})
}

// A job's page tells its story: key and fingerprint, redacted parameters,
// every attempt on the timeline (acknowledged, timed out, lost with its
// result dropped), its last lookup, and the key's chain; what it shows is
// escaped.
func TestJobPage(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j := e.submit(t, "alice", `<script>alert("k")</script>`)
		a1, err := e.m.StartAttempt(e.ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.MarkRunning(e.ctx, a1.ID, "ch_first"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.MarkUnknown(e.ctx, a1.ID, "timed out after 30s"); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		e.prov.answer(&failover.Outcome{State: failover.OutcomePending}, nil)
		if _, err := e.rec.ReconcileAttempt(e.ctx, a1.ID); err != nil {
			t.Fatal(err)
		}
		r := e.get(t, "val:viewer", "/console/jobs/"+j.ID)
		want := []string{j.Fingerprint, "&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;", `&#34;card&#34;: &#34;[redacted]&#34;`,
			"attempt 1 started", "attempt 1 acknowledged", "provider reference ch_first", "attempt 1 timed out: in doubt",
			"timed out after 30s", "attempt 1 looked up"}
		if _, ok := e.m.Store().(jobs.LookupStore); ok {
			want = append(want, "the provider answered: pending")
		}
		r.want(t, 200, want...)
		if strings.Contains(r.body, "4242424242424242") || strings.Contains(r.body, `<script>alert`) {
			t.Errorf("the page shows what it must not:\n%s", r.body)
		}

		// The attempt delivers after the job was cancelled: its result is
		// dropped, and the page says so.
		if _, err := e.m.CancelJob(e.ctx, j.ID, "customer left"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.Complete(e.ctx, a1.ID, []byte(`{"id":"ch_first"}`)); !errors.Is(err, jobs.ErrJobClosed) {
			t.Fatalf("Complete after CancelJob = %v", err)
		}
		e.get(t, "val:viewer", "/console/jobs/"+j.ID).want(t, 200, "result dropped", "job cancelled", "customer left")
		e.get(t, "val:viewer", "/console/jobs/job_00000000000000000000000000").want(t, 404)
	})
}

// The key's chain: a job whose key was reused after it failed shows the
// job that took its key, and that one shows it.
func TestJobPageShowsTheKeyChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memstore.New())
	j := e.submit(t, "alice", "order-1")
	if _, err := e.m.FailJob(e.ctx, j.ID, "gave up"); err != nil {
		t.Fatal(err)
	}
	j2, _, err := e.m.Submit(e.ctx, jobs.SubmitRequest{Owner: "alice", Key: "order-1", Kind: "charge", Provider: "stripe",
		Params: []byte(`{"amount":1200,"card":"4242424242424242"}`), Reuse: jobs.KeyReuseAfterFailure})
	if err != nil {
		t.Fatal(err)
	}
	e.get(t, "val:viewer", "/console/jobs/"+j.ID).want(t, 200, "Jobs that held this key", j2.ID, "Key now held by")
	e.get(t, "val:viewer", "/console/jobs/"+j2.ID).want(t, 200, "Jobs that held this key", j.ID)
}

// The queue lists the attempts in doubt, those that need an operator
// first, with their last lookup; the providers page draws its charts and
// verifications.
func TestInDoubtAndProviders(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		_, a1 := e.unknownAttempt(t, "alice", "k1")
		_, a2 := e.unknownAttempt(t, "alice", "k2")
		e.clock.Advance(time.Minute)
		e.prov.answer(nil, failover.ErrLookupUnsupported)
		if _, err := e.rec.ReconcileAttempt(e.ctx, a2.ID); err != nil {
			t.Fatal(err)
		}
		r := e.get(t, "val:viewer", "/console/in-doubt")
		r.want(t, 200, a1.ID, a2.ID)
		if _, ok := e.m.Store().(jobs.LookupStore); ok {
			r.want(t, 200, "needs an operator", "unsupported:")
			if strings.Index(r.body, a2.ID) > strings.Index(r.body, a1.ID) {
				t.Errorf("the attempt that needs an operator is not first")
			}
		}
		if _, err := e.m.VerifyProvider(e.ctx, "stripe", "charge", func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"id":"ch_test"}`), nil
		}, jobs.ValidFor(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r = e.get(t, "val:viewer", "/console/providers")
		r.want(t, 200, "<svg", "stripe", "in doubt 100%", "Contract verification", "yes, until 2030-01-02 04:05")
		if strings.Contains(r.body, "action=resolve") {
			t.Errorf("a viewer is offered actions in the queue")
		}
		e.get(t, "olga:operator", "/console/in-doubt").want(t, 200, "action=resolve&amp;outcome=succeeded&amp;job=", "action=lookup&amp;job=")
		e.get(t, "val:viewer", "/console/providers?window=1m").want(t, 400)
		e.get(t, "bob:viewer:bob", "/console/providers").want(t, 403)
	})
}

// Results go through the host's redaction too: the job's, and the one an
// operator gives when resolving an attempt.
func TestRedactionOfResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, memstore.New())
	j, a := e.unknownAttempt(t, "alice", "k1")
	form := e.confirmForm(t, "olga:operator", "/console/confirm?action=resolve&outcome=succeeded&job="+j.ID+"&attempt="+a.ID)
	form.Set("reason", "the provider's dashboard")
	form.Set("result", `{"id":"ch_1","card":"4000056655665556"}`)
	if r := e.post(t, "olga:operator", form); r.code != 303 {
		t.Fatalf("POST = %d:\n%s", r.code, r.body)
	}
	r := e.get(t, "val:viewer", "/console/jobs/"+j.ID)
	r.want(t, 200, `&#34;id&#34;: &#34;ch_1&#34;`, `&#34;card&#34;: &#34;[redacted]&#34;`)
	if strings.Contains(r.body, "4000056655665556") {
		t.Errorf("the page shows a result's card number:\n%s", r.body)
	}
}

// plainStore is a store with the core, listing and claims only: none of
// the capabilities for operators' tools (a store written by a third
// party, say).
type plainStore struct {
	jobs.Store
	jobs.JobLister
	jobs.ClaimStore
}

// On a store without the capabilities for operators' tools the console
// does what it can: lists, counts (by pages), job pages and the queue of
// attempts in doubt (from the reconcilers' claims) work; the providers'
// figures, which need attempts across jobs, say the store cannot tell.
func TestOnAStoreWithoutOperatorsCapabilities(t *testing.T) {
	t.Parallel()
	inner := memstore.New()
	e := newEnv(t, plainStore{inner, inner, inner})
	j, a := e.unknownAttempt(t, "alice", "k1")
	e.get(t, "val:viewer", "/console/?count=1").want(t, 200, j.ID, "1 jobs match")
	e.get(t, "val:viewer", "/console/jobs/"+j.ID).want(t, 200, a.ID, "attempt 1 timed out")
	e.get(t, "val:viewer", "/console/in-doubt").want(t, 200, a.ID)
	e.get(t, "val:viewer", "/console/search?q=ch_none").want(t, 200, "Nothing found")
	e.get(t, "val:viewer", "/console/providers").want(t, 501, "cannot answer")
}
