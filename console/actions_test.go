package console_test

import (
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/console"
	"github.com/intentjobs/jobs/failover"
)

// actionRecords lists the records of the actions on job jobID.
func (e *env) actionRecords(t *testing.T, jobID string) []jobs.Job {
	t.Helper()
	js, err := e.m.Store().(jobs.JobLister).ListJobs(e.ctx, jobs.JobQuery{Owner: "console/" + jobID})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A double click (the same confirmed form sent many times at once)
// resolves the attempt once: one record, one result, one event; every
// answer leads to the job's page showing that one action.
func TestResolveOnceHoweverOftenSent(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, a := e.unknownAttempt(t, "alice", "k1")
		form := e.confirmForm(t, "olga:operator", "/console/confirm?action=resolve&outcome=succeeded&job="+j.ID+"&attempt="+a.ID)
		form.Set("reason", "the provider's dashboard shows charge ch_9 captured")
		form.Set("result", `{"id":"ch_9","amount":1200}`)

		const n = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		codes := make([]response, n)
		for i := range n {
			wg.Go(func() {
				<-start
				codes[i] = e.post(t, "olga:operator", form)
			})
		}
		close(start)
		wg.Wait()
		recs := e.actionRecords(t, j.ID)
		if len(recs) != 1 {
			t.Fatalf("%d action records, want 1", len(recs))
		}
		for _, r := range codes {
			if r.code != 303 || r.hdr.Get("Location") != "/console/jobs/"+j.ID+"?action="+recs[0].ID {
				t.Errorf("POST = %d to %q", r.code, r.hdr.Get("Location"))
			}
		}
		got, err := e.m.Get(e.ctx, j.ID)
		if err != nil || got.State != jobs.JobSucceeded || got.CompletedBy != a.ID || string(got.Result) != `{"amount":1200,"id":"ch_9"}` && string(got.Result) != `{"id":"ch_9","amount":1200}` {
			t.Errorf("job after the resolution: %+v, %v", got, err)
		}
		if evs := e.ev.of(console.EventOperatorAction); len(evs) != 1 || evs[0].AttemptID != a.ID ||
			!strings.Contains(evs[0].Reason, "olga (operator)") || !strings.Contains(evs[0].Reason, "dashboard shows charge ch_9") {
			t.Errorf("operator events: %+v", evs)
		}
		if n := len(e.ev.of(jobs.EventAttemptSucceeded)); n != 2 { // the attempt, and the action's own record
			t.Errorf("%d attempt.succeeded events, want 2", n)
		}
		e.get(t, "val:viewer", "/console/jobs/"+j.ID+"?action="+recs[0].ID).want(t, 200, "Done.",
			"operator olga: resolve attempt "+a.ID+" as succeeded", "dashboard shows charge ch_9", "attempt 1 succeeded: its result is the job&#39;s")
	})
}

// An action the state no longer allows says so, and changes nothing; the
// refusal is on the record.
func TestRefusedActions(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, a := e.unknownAttempt(t, "alice", "k1")
		confirm := "/console/confirm?action=resolve&outcome=failed&job=" + j.ID + "&attempt=" + a.ID
		stale := e.confirmForm(t, "olga:operator", confirm)
		stale.Set("reason", "the provider says declined")
		// Meanwhile the attempt is resolved (by a reconciler, say).
		if _, err := e.m.Cancel(e.ctx, a.ID, "never reached the provider"); err != nil {
			t.Fatal(err)
		}
		r := e.post(t, "olga:operator", stale)
		if r.code != 303 {
			t.Fatalf("POST = %d:\n%s", r.code, r.body)
		}
		e.get(t, "olga:operator", r.hdr.Get("Location")).want(t, 200, "Not done.", "Attempt 1 is already cancelled", "nothing was changed")
		if got, _ := e.m.Attempt(e.ctx, a.ID); got.State != jobs.AttemptCancelled || got.Reason != "never reached the provider" {
			t.Errorf("the refused action changed the attempt: %+v", got)
		}
		recs := e.actionRecords(t, j.ID)
		if len(recs) != 1 || recs[0].State != jobs.JobFailed || !strings.HasPrefix(recs[0].Reason, "refused: ") {
			t.Errorf("action records: %+v", recs)
		}
		// The confirmation page says so before anyone confirms.
		e.get(t, "olga:operator", confirm).want(t, 200, "Attempt 1 is already cancelled")
	})
}

// A result that breaks the kind's contract is refused before anything is
// written: the attempt stays in doubt.
func TestResolveRefusesAResultThatBreaksTheContract(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, a := e.unknownAttempt(t, "alice", "k1")
		form := e.confirmForm(t, "olga:operator", "/console/confirm?action=resolve&outcome=succeeded&job="+j.ID+"&attempt="+a.ID)
		form.Set("reason", "pasted from the dashboard")
		form.Set("result", `{"amount":1200}`)
		r := e.post(t, "olga:operator", form)
		e.get(t, "olga:operator", r.hdr.Get("Location")).want(t, 200, "Not done.", "breaks the contract of kind charge", `no &#34;id&#34;`)
		if got, _ := e.m.Attempt(e.ctx, a.ID); got.State != jobs.AttemptUnknown {
			t.Errorf("attempt %s, want it left unknown", got.State)
		}
	})
}

// Forms that are not the actor's, lack a reason or JSON, come from another
// site or reuse a key with other values are refused, and write nothing.
func TestActionFormsAreChecked(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, a := e.unknownAttempt(t, "alice", "k1")
		good := e.confirmForm(t, "olga:operator", "/console/confirm?action=resolve&outcome=succeeded&job="+j.ID+"&attempt="+a.ID)
		good.Set("reason", "evidence")
		good.Set("result", `{"id":"ch_1"}`)
		with := func(k, v string) url.Values {
			f := url.Values{}
			for key, vs := range good {
				f[key] = vs
			}
			f.Set(k, v)
			return f
		}
		for _, tc := range []struct {
			name string
			user string
			form url.Values
			code int
			says string
		}{
			{"another actor's form", "oscar:operator", good, 403, "not made for you"},
			{"a forged token", "olga:operator", with("token", "AAAA"), 403, "not made for you"},
			{"a key not from a form", "olga:operator", with("key", "mine"), 403, "not made for you"},
			{"no reason", "olga:operator", with("reason", "  "), 400, "Give a reason"},
			{"a result that is not JSON", "olga:operator", with("result", "{id: 1}"), 400, "as JSON"},
			{"no such action", "olga:operator", with("action", "delete"), 400, "no such action"},
			{"an attempt of another job", "olga:operator", with("attempt", "att_00000000000000000000000000"), 404, ""},
			{"another tenant's job", "olga:operator:bob", good, 404, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e.post(t, tc.user, tc.form).want(t, tc.code, tc.says)
			})
		}
		r := e.do(t, crossSite(good), "olga:operator")
		if r.code != 403 {
			t.Errorf("a cross-site POST = %d, want 403", r.code)
		}
		if recs := e.actionRecords(t, j.ID); len(recs) != 0 {
			t.Errorf("refused forms left %d action records", len(recs))
		}
		if got, _ := e.m.Attempt(e.ctx, a.ID); got.State != jobs.AttemptUnknown {
			t.Errorf("attempt %s after refused forms", got.State)
		}
		// The same form, sent again with other values, is refused.
		if r := e.post(t, "olga:operator", good); r.code != 303 {
			t.Fatalf("POST = %d:\n%s", r.code, r.body)
		}
		e.post(t, "olga:operator", with("reason", "other evidence")).want(t, 409, "already sent with other values")
	})
}

// Cancelling a job records the operator's reason on the job; a second
// cancellation, with a new form, is refused.
func TestCancelJobAction(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, _ := e.unknownAttempt(t, "alice", "k1")
		// Two operators open the confirmation at once; both confirm.
		var forms []url.Values
		for range 2 {
			form := e.confirmForm(t, "olga:operator", "/console/confirm?action=cancel-job&job="+j.ID)
			form.Set("reason", "customer asked by phone")
			forms = append(forms, form)
		}
		for i, want := range []string{"Done.", "Not done."} {
			r := e.post(t, "olga:operator", forms[i])
			e.get(t, "olga:operator", r.hdr.Get("Location")).want(t, 200, want)
		}
		got, _ := e.m.Get(e.ctx, j.ID)
		if got.State != jobs.JobCancelled || got.Reason != "operator olga: customer asked by phone" {
			t.Errorf("job after the cancellation: %s %q", got.State, got.Reason)
		}
		e.get(t, "olga:operator", "/console/confirm?action=cancel-job&job="+j.ID).want(t, 200, "The job is already cancelled")
	})
}

// Looking an attempt up now asks the provider through the reconciler and
// acts on its answer.
func TestLookupNowAction(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		j, a := e.unknownAttempt(t, "alice", "k1")
		e.prov.answer(&failover.Outcome{State: failover.OutcomeSucceeded, Result: []byte(`{"id":"ch_7"}`)}, nil)
		form := e.confirmForm(t, "olga:operator", "/console/confirm?action=lookup&job="+j.ID+"&attempt="+a.ID)
		form.Set("reason", "the customer says they were charged")
		r := e.post(t, "olga:operator", form)
		e.get(t, "olga:operator", r.hdr.Get("Location")).want(t, 200, "Done.", "attempt 1 is now succeeded")
		if got, _ := e.m.Get(e.ctx, j.ID); got.State != jobs.JobSucceeded {
			t.Errorf("job %s, want succeeded", got.State)
		}
	})
}
