package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// The cases of Submit and the reads: one job per owner and key however
// many requests carry it, one intent per key, bad input and cancelled
// contexts writing nothing, and what the reads return.

func testDoubleClick(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	const n = 64
	e.submitAtOnce(n, req("owner-1", "click-1"))
	if got := e.countJobs(); got != 1 {
		t.Errorf("store holds %d jobs after %d identical Submits, want 1", got, n)
	}
	e.checkInvariants()
}

// submitAtOnce releases n identical Submits of r at once and checks that
// all return one job, which exactly one of them created. It returns the
// job's ID.
func (e *env) submitAtOnce(n int, r jobs.SubmitRequest) string {
	e.t.Helper()
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	release(n, func(i int) {
		var j jobs.Job
		j, created[i], errs[i] = e.m.Submit(e.ctx, r)
		ids[i] = j.ID
	})
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			e.t.Fatalf("Submit %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] || ids[i] == "" {
			e.t.Fatalf("Submit %d returned job %q, Submit 0 returned %q", i, ids[i], ids[0])
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated != 1 {
		e.t.Errorf("%d of %d concurrent Submits reported created, want exactly 1", nCreated, n)
	}
	return ids[0]
}

func testSameIntent(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	first := e.submit(jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "summarize", Provider: "model-a",
		Params: json.RawMessage(`{"prompt":"hi","opts":{"n":1,"t":0.5},"tags":["a","b"]}`)})
	for _, params := range []string{
		`{"tags":["a","b"],"opts":{"t":0.5,"n":1},"prompt":"hi"}`,
		"{\n  \"prompt\" : \"hi\",\n  \"opts\" : { \"n\" : 1, \"t\" : 0.5 },\n  \"tags\" : [ \"a\" , \"b\" ]\n}\n",
		`{"prompt":"\u0068i","opts":{"n":1,"t":0.5},"tags":["a","b"]}`,
	} {
		j, created, err := e.m.Submit(e.ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "summarize", Provider: "model-a", Params: json.RawMessage(params)})
		if err != nil || created || j.ID != first.ID {
			t.Errorf("Submit(%s) = %s, created=%v, %v; want job %s, created=false, nil", params, j.ID, created, err, first.ID)
		}
		if diff := cmp.Diff(first, j); diff != "" {
			t.Errorf("replayed job differs from the first (-first +replay):\n%s", diff)
		}
	}
	if got := e.countJobs(); got != 1 {
		t.Errorf("store holds %d jobs, want 1", got)
	}
}

func testKeyConflict(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	orig := jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "charge", Provider: "acme", Params: json.RawMessage(`{"amount":1200}`)}
	first := e.submit(orig)
	for _, tc := range []struct {
		name   string
		change func(r *jobs.SubmitRequest)
	}{
		{"params value", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"amount":1300}`) }},
		{"params type", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"amount":"1200"}`) }},
		{"params number literal", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"amount":1200.0}`) }},
		{"params extra key", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"amount":1200,"tip":0}`) }},
		{"provider", func(r *jobs.SubmitRequest) { r.Provider = "other" }},
		{"kind", func(r *jobs.SubmitRequest) { r.Kind = "refund" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := orig
			tc.change(&r)
			_, _, err := e.m.Submit(e.ctx, r)
			if !errors.Is(err, jobs.ErrKeyConflict) {
				t.Fatalf("Submit = %v, want ErrKeyConflict", err)
			}
			var kc *jobs.KeyConflictError
			if !errors.As(err, &kc) || kc.JobID != first.ID {
				t.Fatalf("error %v does not name the existing job %s", err, first.ID)
			}
			if diff := cmp.Diff(first, e.job(first.ID)); diff != "" {
				t.Errorf("the existing job changed (-before +after):\n%s", diff)
			}
		})
	}
	if got := e.countJobs(); got != 1 {
		t.Errorf("store holds %d jobs, want 1", got)
	}
}

func testOwnersAreSeparate(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	a := e.submit(req("alice", "same-key"))
	b, created, err := e.m.Submit(e.ctx, req("bob", "same-key"))
	if err != nil || !created || b.ID == a.ID {
		t.Fatalf("Submit(bob, same key) = %s, created=%v, %v; want a new job", b.ID, created, err)
	}
	// A different intent under bob's own key is bob's conflict alone; alice's job is untouched.
	r := req("bob", "same-key")
	r.Params = json.RawMessage(`{"amount":1}`)
	_, _, err = e.m.Submit(e.ctx, r)
	var kc *jobs.KeyConflictError
	if !errors.As(err, &kc) || kc.JobID != b.ID {
		t.Fatalf("conflict under bob's key = %v, want one naming bob's job %s", err, b.ID)
	}
	got, err := e.m.GetByKey(e.ctx, "alice", "same-key")
	if err != nil || got.ID != a.ID || got.Owner != "alice" {
		t.Fatalf("GetByKey(alice) = %s (%s), %v; want %s", got.ID, got.Owner, err, a.ID)
	}
	if got := e.countJobs(); got != 2 {
		t.Errorf("store holds %d jobs, want 2", got)
	}
}

func testInvalidInput(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	long := strings.Repeat("k", 256)
	big := json.RawMessage(`"` + strings.Repeat("x", jobs.DefaultMaxParamsBytes) + `"`)
	cases := []struct {
		name   string
		change func(r *jobs.SubmitRequest)
		field  string
	}{
		{"empty owner", func(r *jobs.SubmitRequest) { r.Owner = "" }, "Owner"},
		{"oversized owner", func(r *jobs.SubmitRequest) { r.Owner = long }, "Owner"},
		{"owner invalid UTF-8", func(r *jobs.SubmitRequest) { r.Owner = "a\xffb" }, "Owner"},
		{"owner NUL", func(r *jobs.SubmitRequest) { r.Owner = "a\x00b" }, "Owner"},
		{"empty key", func(r *jobs.SubmitRequest) { r.Key = "" }, "Key"},
		{"oversized key", func(r *jobs.SubmitRequest) { r.Key = long }, "Key"},
		{"key invalid UTF-8", func(r *jobs.SubmitRequest) { r.Key = "\xc3\x28" }, "Key"},
		{"key NUL", func(r *jobs.SubmitRequest) { r.Key = "k\x00" }, "Key"},
		{"empty kind", func(r *jobs.SubmitRequest) { r.Kind = "" }, "Kind"},
		{"provider invalid UTF-8", func(r *jobs.SubmitRequest) { r.Provider = "\xff" }, "Provider"},
		{"params missing", func(r *jobs.SubmitRequest) { r.Params = nil }, "Params"},
		{"params not JSON", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{amount: 1}`) }, "Params"},
		{"params trailing data", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{} {}`) }, "Params"},
		{"params duplicate key", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"a":1,"a":2}`) }, "Params"},
		{"params invalid UTF-8", func(r *jobs.SubmitRequest) { r.Params = json.RawMessage("\"\xff\"") }, "Params"},
		{"params over the size limit", func(r *jobs.SubmitRequest) { r.Params = big }, "Params"},
		{"params nested 129 levels", func(r *jobs.SubmitRequest) { r.Params = nestedJSON(129) }, "Params"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := req("owner-1", "key-1")
			tc.change(&r)
			_, _, err := e.m.Submit(e.ctx, r)
			if !errors.Is(err, jobs.ErrInvalidInput) {
				t.Fatalf("Submit = %v, want ErrInvalidInput", err)
			}
			var ie *jobs.InputError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Fatalf("error %v does not name field %s", err, tc.field)
			}
		})
	}
	if got := e.countJobs(); got != 0 {
		t.Fatalf("store holds %d jobs after only invalid Submits, want 0", got)
	}

	// The other verbs reject bad input before touching the store.
	j := e.newJob()
	a := e.start(j.ID, "")
	before, beforeJob := e.attempt(a.ID), e.job(j.ID)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"StartAttempt empty job ID", func() error { _, err := e.m.StartAttempt(e.ctx, "", ""); return err }},
		{"StartAttempt bad provider", func() error { _, err := e.m.StartAttempt(e.ctx, j.ID, "p\x00"); return err }},
		{"MarkRunning empty reference", func() error { _, err := e.m.MarkRunning(e.ctx, a.ID, ""); return err }},
		{"MarkRunning reference invalid UTF-8", func() error { _, err := e.m.MarkRunning(e.ctx, a.ID, "\xff"); return err }},
		{"MarkUnknown reason with NUL", func() error { _, err := e.m.MarkUnknown(e.ctx, a.ID, "x\x00"); return err }},
		{"Fail oversized reason", func() error { _, err := e.m.Fail(e.ctx, a.ID, strings.Repeat("r", 5000)); return err }},
		{"Complete result not JSON", func() error { _, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{`)); return err }},
		{"Complete empty result", func() error { _, err := e.m.Complete(e.ctx, a.ID, nil); return err }},
		{"Complete oversized result", func() error {
			_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`"`+strings.Repeat("x", jobs.DefaultMaxResultBytes)+`"`))
			return err
		}},
		{"Complete result nested 129 levels", func() error { _, err := e.m.Complete(e.ctx, a.ID, nestedJSON(129)); return err }},
		{"Cancel with the reason of a dropped result", func() error {
			_, err := e.m.Cancel(e.ctx, a.ID, jobs.ReasonDroppedJobCancelled)
			return err
		}},
		{"Fail with a reason of a dropped result", func() error {
			_, err := e.m.Fail(e.ctx, a.ID, "result dropped: attempt x completed the job first")
			return err
		}},
		{"Cancel empty attempt ID", func() error { _, err := e.m.Cancel(e.ctx, "", "r"); return err }},
		{"CancelJob reason invalid UTF-8", func() error { _, err := e.m.CancelJob(e.ctx, j.ID, "\xff"); return err }},
		{"GetByKey empty owner", func() error { _, err := e.m.GetByKey(e.ctx, "", "k"); return err }},
		{"Get oversized ID", func() error { _, err := e.m.Get(e.ctx, long); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, jobs.ErrInvalidInput) {
				t.Fatalf("got %v, want ErrInvalidInput", err)
			}
		})
	}
	if diff := cmp.Diff(before, e.attempt(a.ID)); diff != "" {
		t.Errorf("attempt changed by rejected calls (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeJob, e.job(j.ID)); diff != "" {
		t.Errorf("job changed by rejected calls (-before +after):\n%s", diff)
	}

	// Nesting up to the documented limit is stored and read back whole.
	r := req("owner-1", "deep")
	r.Params = nestedJSON(128)
	deep := e.submit(r)
	if got := e.job(deep.ID); string(got.Params) != string(nestedJSON(128)) {
		t.Errorf("params nested 128 levels read back as %.40s…", got.Params)
	}
	if done, err := e.m.Complete(e.ctx, e.start(deep.ID, "").ID, nestedJSON(128)); err != nil || string(done.Result) != string(nestedJSON(128)) {
		t.Errorf("Complete with a result nested 128 levels = %.40s…, %v", done.Result, err)
	}
}

// nestedJSON returns levels arrays inside one another around a number.
func nestedJSON(levels int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", levels) + "1" + strings.Repeat("]", levels))
}

func testCancelledContext(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	a := e.start(j.ID, "")
	beforeJob, before := e.job(j.ID), e.attempt(a.ID)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Submit", func() error { _, _, err := e.m.Submit(ctx, req("owner-1", "never")); return err }},
		{"StartAttempt", func() error { _, err := e.m.StartAttempt(ctx, j.ID, "", jobs.Hedge()); return err }},
		{"MarkRunning", func() error { _, err := e.m.MarkRunning(ctx, a.ID, "ref"); return err }},
		{"MarkUnknown", func() error { _, err := e.m.MarkUnknown(ctx, a.ID, "timeout"); return err }},
		{"Complete", func() error { _, err := e.m.Complete(ctx, a.ID, json.RawMessage(`{}`)); return err }},
		{"Fail", func() error { _, err := e.m.Fail(ctx, a.ID, "no"); return err }},
		{"Cancel", func() error { _, err := e.m.Cancel(ctx, a.ID, "no"); return err }},
		{"CancelJob", func() error { _, err := e.m.CancelJob(ctx, j.ID, "no"); return err }},
		{"FailJob", func() error { _, err := e.m.FailJob(ctx, j.ID, "no"); return err }},
		{"Get", func() error { _, err := e.m.Get(ctx, j.ID); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
		})
	}
	if _, err := e.m.GetByKey(e.ctx, "owner-1", "never"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("GetByKey after a cancelled Submit = %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff(before, e.attempt(a.ID)); diff != "" {
		t.Errorf("attempt changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeJob, e.job(j.ID)); diff != "" {
		t.Errorf("job changed (-before +after):\n%s", diff)
	}
	if n := len(e.attempts(j.ID)); n != 1 {
		t.Errorf("job has %d attempts, want 1", n)
	}
}

func testNotFound(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	const job, att = "job_00000000000000000000000000", "att_00000000000000000000000000"
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := e.m.Get(e.ctx, job); return err }},
		{"GetByKey", func() error { _, err := e.m.GetByKey(e.ctx, "nobody", "nothing"); return err }},
		{"Attempts", func() error { _, err := e.m.Attempts(e.ctx, job); return err }},
		{"Attempt", func() error { _, err := e.m.Attempt(e.ctx, att); return err }},
		{"StartAttempt", func() error { _, err := e.m.StartAttempt(e.ctx, job, ""); return err }},
		{"MarkRunning", func() error { _, err := e.m.MarkRunning(e.ctx, att, "ref"); return err }},
		{"MarkUnknown", func() error { _, err := e.m.MarkUnknown(e.ctx, att, "timeout"); return err }},
		{"Complete", func() error { _, err := e.m.Complete(e.ctx, att, json.RawMessage(`{}`)); return err }},
		{"Fail", func() error { _, err := e.m.Fail(e.ctx, att, "no"); return err }},
		{"Cancel", func() error { _, err := e.m.Cancel(e.ctx, att, "no"); return err }},
		{"FailJob", func() error { _, err := e.m.FailJob(e.ctx, job, "no"); return err }},
		{"CancelJob", func() error { _, err := e.m.CancelJob(e.ctx, job, "no"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("got %v, want ErrNotFound", err)
			}
		})
	}
	if got := e.countJobs(); got != 0 {
		t.Errorf("store holds %d jobs, want 0", got)
	}
}

func testReads(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j, created, err := e.m.Submit(e.ctx, req("owner-1", "read-1"))
	if err != nil || !created {
		t.Fatal(err)
	}
	want := jobs.Job{
		ID: j.ID, Owner: "owner-1", Key: "read-1", Kind: "charge", Provider: "acme",
		Params:      json.RawMessage(`{"amount":1200,"currency":"eur"}`),
		Fingerprint: jobs.Fingerprint("charge", "acme", []byte(`{"amount":1200,"currency":"eur"}`)),
		State:       jobs.JobPending, Version: 1, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now(),
	}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("Submit returned (-want +got):\n%s", diff)
	}
	for name, get := range map[string]func() (jobs.Job, error){
		"Get":      func() (jobs.Job, error) { return e.m.Get(e.ctx, j.ID) },
		"GetByKey": func() (jobs.Job, error) { return e.m.GetByKey(e.ctx, "owner-1", "read-1") },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if as := e.attempts(j.ID); len(as) != 0 {
		t.Errorf("new job has %d attempts", len(as))
	}
	var ids []string
	for range 3 {
		e.clock.Advance(time.Second)
		a := e.start(j.ID, "")
		ids = append(ids, a.ID)
		e.m.Fail(e.ctx, a.ID, "declined")
	}
	as := e.attempts(j.ID)
	if len(as) != 3 {
		t.Fatalf("%d attempts, want 3", len(as))
	}
	for i, a := range as {
		if a.ID != ids[i] || a.Seq != i+1 || a.State != jobs.AttemptFailed || a.Reason != "declined" {
			t.Errorf("attempt %d = %+v", i, a)
		}
	}
	if !(ids[0] < ids[1] && ids[1] < ids[2]) {
		t.Errorf("attempt IDs do not sort by creation time: %v", ids)
	}
}
