package jobstest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
)

// Run runs the conformance suite. newStore must return a new, empty store
// each time it is called, cleaned up when t ends. The store must be a
// jobs.JobLister as well as a jobs.Store: the suite reads everything it
// stored to see that refused calls wrote nothing and that the invariants
// hold. The cases of every other capability run where the store has it
// (see Capabilities).
func Run(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	probe := newStore(t)
	if _, ok := probe.(jobs.JobLister); !ok {
		t.Fatalf("jobstest: a %T is not a jobs.JobLister: the suite reads every job it stored to check the invariants", probe)
	}
	has := Capabilities(probe)
	for _, c := range cases {
		if c.needs != "" && !has[c.needs] {
			t.Run(c.name, func(t *testing.T) { t.Skipf("the store is not a %s", c.needs) })
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore)
		})
	}
}

// Capabilities reports which of the optional interfaces of package jobs
// the store implements, by name ("TxStore", "ClaimStore", …): the cases of
// each run only where it is true.
func Capabilities(s jobs.Store) map[string]bool {
	_, tx := s.(jobs.TxStore)
	_, lister := s.(jobs.JobLister)
	_, claims := s.(jobs.ClaimStore)
	_, verifications := s.(jobs.VerificationStore)
	_, purge := s.(jobs.PurgeStore)
	_, notifier := s.(jobs.CloseNotifier)
	return map[string]bool{"TxStore": tx, "JobLister": lister, "ClaimStore": claims,
		"VerificationStore": verifications, "PurgeStore": purge, "CloseNotifier": notifier}
}

// cases are the suite's cases, each with the capability it needs, if any.
var cases = []struct {
	name  string
	needs string
	fn    func(t *testing.T, newStore func(t testing.TB) jobs.Store)
}{
	{"DoubleClick", "", testDoubleClick},
	{"AfterNewKeys", "", testAfterNewKeys},
	{"AfterReplays", "", testAfterReplays},
	{"SameIntent", "", testSameIntent},
	{"KeyConflict", "", testKeyConflict},
	{"KeyReuse", "", testKeyReuse},
	{"OwnersAreSeparate", "", testOwnersAreSeparate},
	{"InvalidInput", "", testInvalidInput},
	{"CancelledContext", "", testCancelledContext},
	{"NotFound", "", testNotFound},
	{"StartAttemptRules", "", testStartAttemptRules},
	{"StartAttemptRace", "", testStartAttemptRace},
	{"TimeoutBlocksUntilResolved", "", testTimeoutBlocks},
	{"FinishingOrderDecides", "", testFinishingOrder},
	{"CompleteRace", "", testCompleteRace},
	{"CancelRacesComplete", "", testCancelRacesComplete},
	{"CompleteReturnsRows", "", testCompleteReturnsRows},
	{"AttemptTransitions", "", testAttemptTransitions},
	{"JobTransitions", "", testJobTransitions},
	{"RetrySafety", "", testRetrySafety},
	{"OneAttemptInDoubt", "", testOneInDoubt},
	{"MarkUnknownRacesHedge", "", testMarkUnknownRacesHedge},
	{"UnknownAttemptLearnsReference", "", testUnknownLearnsReference},
	{"ReferenceRace", "", testReferenceRace},
	{"Reads", "", testReads},
	{"StoreRefusals", "", testStoreRefusals},
	{"ListJobs", "JobLister", testListJobs},
	{"SubmitTx", "", testSubmitTx},
	{"Verification", "VerificationStore", testVerification},
	{"Purge", "PurgeStore", testPurge},
	{"Reconcile", "ClaimStore", testReconcile},
}

// env is what one case needs.
type env struct {
	t     *testing.T
	ctx   context.Context
	store jobs.Store
	m     *jobs.Manager
	clock *Clock
}

func setup(t *testing.T, newStore func(t testing.TB) jobs.Store, opts ...func(*jobs.Options)) *env {
	t.Helper()
	s := newStore(t)
	clock := NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o := jobs.Options{Clock: clock, Logger: discardLogger()}
	for _, f := range opts {
		f(&o)
	}
	return &env{t: t, ctx: t.Context(), store: s, m: NewManager(t, s, o), clock: clock}
}

// with returns a copy of e for the subtest t.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func req(owner, key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200,"currency":"eur"}`)}
}

// randomHex returns n random bytes in hex, to make keys unique.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) submit(r jobs.SubmitRequest) jobs.Job {
	e.t.Helper()
	j, _, err := e.m.Submit(e.ctx, r)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	return j
}

func (e *env) newJob() jobs.Job {
	e.t.Helper()
	return e.submit(req("owner-1", "key-"+randomHex(4)))
}

func (e *env) start(jobID, provider string, opts ...jobs.AttemptOption) jobs.Attempt {
	e.t.Helper()
	a, err := e.m.StartAttempt(e.ctx, jobID, provider, opts...)
	if err != nil {
		e.t.Fatalf("StartAttempt: %v", err)
	}
	return a
}

func (e *env) running(jobID string, opts ...jobs.AttemptOption) jobs.Attempt {
	e.t.Helper()
	a := e.start(jobID, "", opts...)
	a, err := e.m.MarkRunning(e.ctx, a.ID, "ref-"+a.ID)
	if err != nil {
		e.t.Fatalf("MarkRunning: %v", err)
	}
	return a
}

func (e *env) job(id string) jobs.Job {
	e.t.Helper()
	j, err := e.m.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

func (e *env) attempt(id string) jobs.Attempt {
	e.t.Helper()
	a, err := e.m.Attempt(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Attempt(%s): %v", id, err)
	}
	return a
}

func (e *env) attempts(jobID string) []jobs.Attempt {
	e.t.Helper()
	as, err := e.m.Attempts(e.ctx, jobID)
	if err != nil {
		e.t.Fatalf("Attempts(%s): %v", jobID, err)
	}
	return as
}

// countJobs counts every job in the store.
func (e *env) countJobs() int {
	e.t.Helper()
	return len(e.snapshot().Jobs)
}

// claims returns the store as a ClaimStore; the cases that call it run
// only on stores that have it.
func (e *env) claims() jobs.ClaimStore {
	e.t.Helper()
	cs, ok := e.store.(jobs.ClaimStore)
	if !ok {
		e.t.Fatalf("a %T is not a jobs.ClaimStore", e.store)
	}
	return cs
}

// readable returns the store as package invariant reads it: the suite
// reads every job to check the invariants, so a store under test must be a
// JobLister (see Run).
func (e *env) readable() invariant.Store {
	e.t.Helper()
	s, ok := e.store.(invariant.Store)
	if !ok {
		e.t.Fatalf("a %T is not a jobs.JobLister, which the suite needs to read what it stored", e.store)
	}
	return s
}

// checkInvariants fails the test on any violation in the store.
func (e *env) checkInvariants() {
	e.t.Helper()
	vs, err := invariant.Check(context.WithoutCancel(e.ctx), e.readable())
	if err != nil {
		e.t.Fatalf("invariant.Check: %v", err)
	}
	for _, v := range vs {
		e.t.Errorf("invariant violated: %s", v)
	}
}

// release runs fn in n goroutines that all start at the same moment, and
// waits for them.
func release(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
}

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

func testStartAttemptRules(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	type setupFn func(j jobs.Job) (blocker string)
	for _, tc := range []struct {
		name    string
		prepare setupFn
		hedge   bool
		wantErr error
	}{
		{"pending job", func(jobs.Job) string { return "" }, false, nil},
		{"after a failed attempt", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Fail(e.ctx, a.ID, "declined")
			return ""
		}, false, nil},
		{"after a cancelled attempt", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Cancel(e.ctx, a.ID, "never sent")
			return ""
		}, false, nil},
		{"past starting", func(j jobs.Job) string { return e.start(j.ID, "").ID }, false, jobs.ErrAttemptInFlight},
		{"hedge past starting", func(j jobs.Job) string { return e.start(j.ID, "").ID }, true, jobs.ErrAttemptInFlight},
		{"past running", func(j jobs.Job) string { return e.running(j.ID).ID }, false, jobs.ErrAttemptInFlight},
		{"hedge past running", func(j jobs.Job) string { e.running(j.ID); return "" }, true, nil},
		{"past unknown", func(j jobs.Job) string {
			a := e.running(j.ID)
			e.m.MarkUnknown(e.ctx, a.ID, "timeout")
			return a.ID
		}, false, jobs.ErrAttemptInFlight},
		{"hedge past unknown", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.MarkUnknown(e.ctx, a.ID, "timeout")
			return a.ID
		}, true, jobs.ErrAttemptInFlight},
		{"succeeded job", func(j jobs.Job) string {
			a := e.start(j.ID, "")
			e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"ok":true}`))
			return ""
		}, true, jobs.ErrJobClosed},
		{"failed job", func(j jobs.Job) string { e.m.FailJob(e.ctx, j.ID, "gave up"); return "" }, false, jobs.ErrJobClosed},
		{"cancelled job", func(j jobs.Job) string { e.m.CancelJob(e.ctx, j.ID, "stop"); return "" }, false, jobs.ErrJobClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			blocker := tc.prepare(j)
			before := e.attempts(j.ID)
			var opts []jobs.AttemptOption
			if tc.hedge {
				opts = append(opts, jobs.Hedge())
			}
			a, err := e.m.StartAttempt(e.ctx, j.ID, "", opts...)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("StartAttempt = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if blocker != "" {
					var inflight *jobs.AttemptInFlightError
					if !errors.As(err, &inflight) || inflight.AttemptID != blocker || inflight.JobID != j.ID {
						t.Errorf("error %v does not name the blocking attempt %s", err, blocker)
					}
				}
				if diff := cmp.Diff(before, e.attempts(j.ID)); diff != "" {
					t.Errorf("a refused StartAttempt wrote (-before +after):\n%s", diff)
				}
				return
			}
			cur := e.job(j.ID)
			if a.State != jobs.AttemptStarting || a.JobID != j.ID || a.Seq != len(before)+1 ||
				a.BaseVersion != cur.Version || a.Provider != j.Provider || a.Hedge != tc.hedge {
				t.Errorf("attempt = %+v; want starting, seq %d, base version %d, provider %s", a, len(before)+1, cur.Version, j.Provider)
			}
			if cur.State != jobs.JobRunning || cur.Attempts != len(before)+1 {
				t.Errorf("job state %s with %d attempts, want running with %d", cur.State, cur.Attempts, len(before)+1)
			}
		})
	}
	e.checkInvariants()
}

func testStartAttemptRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, hedge := range []bool{false, true} {
		t.Run(fmt.Sprintf("hedge=%v", hedge), func(t *testing.T) {
			e := e.with(t)
			j := e.newJob()
			if hedge {
				e.running(j.ID) // hedges may pass a running attempt, but only one at a time may start
			}
			const n = 32
			errs := make([]error, n)
			ids := make([]string, n)
			release(n, func(i int) {
				var opts []jobs.AttemptOption
				if hedge {
					opts = append(opts, jobs.Hedge())
				}
				a, err := e.m.StartAttempt(e.ctx, j.ID, "", opts...)
				ids[i], errs[i] = a.ID, err
			})
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, jobs.ErrAttemptInFlight):
					t.Errorf("StartAttempt %d: %v, want nil or ErrAttemptInFlight", i, err)
				}
			}
			want := 1
			if hedge {
				want = 2 // the running one and the single new one
			}
			if won != 1 {
				t.Errorf("%d of %d concurrent StartAttempts succeeded, want exactly 1", won, n)
			}
			if got := len(e.attempts(j.ID)); got != want {
				t.Errorf("job has %d attempts, want %d", got, want)
			}
		})
	}
	e.checkInvariants()
}

func testTimeoutBlocks(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name    string
		resolve func(a jobs.Attempt) error
		after   error // what StartAttempt returns once resolved
	}{
		{"completed", func(a jobs.Attempt) error {
			_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"late":"but fine"}`))
			return err
		}, jobs.ErrJobClosed},
		{"failed", func(a jobs.Attempt) error { _, err := e.m.Fail(e.ctx, a.ID, "provider says no"); return err }, nil},
		{"cancelled", func(a jobs.Attempt) error { _, err := e.m.Cancel(e.ctx, a.ID, "never arrived"); return err }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			a := e.running(j.ID)
			u, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer after 30s")
			if err != nil || u.State != jobs.AttemptUnknown || u.Reason != "no answer after 30s" || u.ProviderRef != a.ProviderRef {
				t.Fatalf("MarkUnknown = %+v, %v", u, err)
			}
			for _, hedge := range []bool{false, true} {
				opts := []jobs.AttemptOption{}
				if hedge {
					opts = append(opts, jobs.Hedge())
				}
				_, err = e.m.StartAttempt(e.ctx, j.ID, "", opts...)
				var inflight *jobs.AttemptInFlightError
				if !errors.As(err, &inflight) || inflight.AttemptID != a.ID || inflight.State != jobs.AttemptUnknown {
					t.Fatalf("StartAttempt(hedge=%v) while unknown = %v, want ErrAttemptInFlight naming %s", hedge, err, a.ID)
				}
			}
			if _, err := e.m.FailJob(e.ctx, j.ID, "give up"); !errors.Is(err, jobs.ErrAttemptInFlight) {
				t.Fatalf("FailJob while unknown = %v, want ErrAttemptInFlight", err)
			}
			if err := tc.resolve(a); err != nil {
				t.Fatalf("resolving the unknown attempt: %v", err)
			}
			_, err = e.m.StartAttempt(e.ctx, j.ID, "")
			if !errors.Is(err, tc.after) || (tc.after == nil) != (err == nil) {
				t.Fatalf("StartAttempt after resolution = %v, want %v", err, tc.after)
			}
		})
	}
	e.checkInvariants()
}

func testFinishingOrder(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name         string
		secondFirst  bool
		winnerResult string
	}{
		{"reverse: B starts second, finishes first, wins", true, `{"by":"B"}`},
		{"plain: A starts first, finishes first, wins", false, `{"by":"A"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := e.newJob()
			a := e.running(j.ID)
			e.clock.Advance(10 * time.Second)
			b := e.start(j.ID, "fallback", jobs.Hedge())
			if _, err := e.m.MarkRunning(e.ctx, b.ID, "ref-b"); err != nil {
				t.Fatal(err)
			}
			winner, loser := a, b
			winRes, loseRes := json.RawMessage(`{"by":"A"}`), json.RawMessage(`{"by":"B"}`)
			if tc.secondFirst {
				winner, loser = b, a
				winRes, loseRes = loseRes, winRes
			}
			e.clock.Advance(5 * time.Second)
			done, err := e.m.Complete(e.ctx, winner.ID, winRes)
			if err != nil {
				t.Fatalf("first Complete: %v", err)
			}
			if done.State != jobs.JobSucceeded || done.CompletedBy != winner.ID || done.Version != j.Version+1 ||
				string(done.Result) != tc.winnerResult {
				t.Fatalf("job after the first Complete = %+v; want succeeded by %s at version %d with %s", done, winner.ID, j.Version+1, tc.winnerResult)
			}
			e.clock.Advance(25 * time.Second)
			_, err = e.m.Complete(e.ctx, loser.ID, loseRes)
			var lost *jobs.LostRaceError
			if !errors.Is(err, jobs.ErrLostRace) || !errors.As(err, &lost) || lost.WinnerID != winner.ID || lost.AttemptID != loser.ID {
				t.Fatalf("late Complete = %v, want ErrLostRace naming winner %s", err, winner.ID)
			}
			final := e.job(j.ID)
			if diff := cmp.Diff(done, final); diff != "" {
				t.Errorf("the late result changed the job (-after first +after late):\n%s", diff)
			}
			if got := e.attempt(loser.ID); got.State != jobs.AttemptLost || got.FinishedAt.IsZero() {
				t.Errorf("loser attempt = %s (finished %v), want lost", got.State, got.FinishedAt)
			}
			if got := e.attempt(winner.ID); got.State != jobs.AttemptSucceeded {
				t.Errorf("winner attempt = %s, want succeeded", got.State)
			}
		})
	}
	e.checkInvariants()
}

func testCompleteRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	const n = 32
	atts := make([]jobs.Attempt, n)
	for i := range n {
		atts[i] = e.running(j.ID, jobs.Hedge())
	}
	errs := make([]error, n)
	results := make([]jobs.Job, n)
	release(n, func(i int) {
		results[i], errs[i] = e.m.Complete(e.ctx, atts[i].ID, json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, i)))
	})
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("attempts %d and %d both won", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no attempt won: %v", errs[0])
	}
	for i, err := range errs {
		if i == winner {
			continue
		}
		var lost *jobs.LostRaceError
		if !errors.As(err, &lost) || lost.WinnerID != atts[winner].ID {
			t.Errorf("Complete %d = %v, want ErrLostRace naming %s", i, err, atts[winner].ID)
		}
	}
	final := e.job(j.ID)
	if final.CompletedBy != atts[winner].ID || final.Version != j.Version+1 || string(final.Result) != fmt.Sprintf(`{"attempt":%d}`, winner) {
		t.Errorf("job = %+v; want completed by %s, version %d, its result", final, atts[winner].ID, j.Version+1)
	}
	lostCount := 0
	for _, a := range e.attempts(j.ID) {
		if a.State == jobs.AttemptLost {
			lostCount++
		}
	}
	if lostCount != n-1 {
		t.Errorf("%d attempts lost, want %d", lostCount, n-1)
	}
	e.checkInvariants()
}

// transition verbs, applied to an attempt in a given state.
type verb struct {
	name string
	to   jobs.AttemptState
	call func(e *env, a jobs.Attempt) error
}

var verbs = []verb{
	{"MarkRunning", jobs.AttemptRunning, func(e *env, a jobs.Attempt) error {
		ref := a.ProviderRef
		if ref == "" {
			ref = "ref-" + a.ID
		}
		_, err := e.m.MarkRunning(e.ctx, a.ID, ref)
		return err
	}},
	{"MarkRunning with another reference", jobs.AttemptRunning, func(e *env, a jobs.Attempt) error {
		_, err := e.m.MarkRunning(e.ctx, a.ID, "other-ref")
		return err
	}},
	{"MarkUnknown", jobs.AttemptUnknown, func(e *env, a jobs.Attempt) error {
		_, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout")
		return err
	}},
	{"Complete", jobs.AttemptSucceeded, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"ok":true}`))
		return err
	}},
	{"Fail", jobs.AttemptFailed, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Fail(e.ctx, a.ID, "declined")
		return err
	}},
	{"Cancel", jobs.AttemptCancelled, func(e *env, a jobs.Attempt) error {
		_, err := e.m.Cancel(e.ctx, a.ID, "stopped")
		return err
	}},
}

// attemptIn returns an attempt in state s (on a fresh job).
func (e *env) attemptIn(s jobs.AttemptState) jobs.Attempt {
	e.t.Helper()
	j := e.newJob()
	a := e.start(j.ID, "")
	var err error
	switch s {
	case jobs.AttemptStarting:
	case jobs.AttemptRunning:
		a, err = e.m.MarkRunning(e.ctx, a.ID, "ref-1")
	case jobs.AttemptUnknown:
		a, err = e.m.MarkUnknown(e.ctx, a.ID, "timeout")
	case jobs.AttemptSucceeded:
		_, err = e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"first":true}`))
	case jobs.AttemptLost:
		if _, err = e.m.MarkRunning(e.ctx, a.ID, "ref-1"); err == nil {
			b := e.start(j.ID, "", jobs.Hedge())
			if _, err = e.m.Complete(e.ctx, b.ID, json.RawMessage(`{"hedge":true}`)); err == nil {
				_, err = e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"late":true}`))
				if errors.Is(err, jobs.ErrLostRace) {
					err = nil
				}
			}
		}
	case jobs.AttemptFailed:
		_, err = e.m.Fail(e.ctx, a.ID, "declined")
	case jobs.AttemptCancelled:
		_, err = e.m.Cancel(e.ctx, a.ID, "stopped")
	}
	if err != nil {
		e.t.Fatalf("putting an attempt in state %s: %v", s, err)
	}
	a = e.attempt(a.ID)
	if a.State != s {
		e.t.Fatalf("attempt is %s, want %s", a.State, s)
	}
	return a
}

func testAttemptTransitions(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	states := []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown,
		jobs.AttemptSucceeded, jobs.AttemptLost, jobs.AttemptFailed, jobs.AttemptCancelled}
	for _, from := range states {
		for _, v := range verbs {
			// What the verb must do from this state: move (legal edge), nothing
			// (already there: a repeat), or refuse.
			legal := from.CanMoveTo(v.to) && !(v.name == "MarkRunning with another reference" && from == jobs.AttemptRunning)
			repeat := from == v.to && v.name != "MarkRunning with another reference"
			// An unknown attempt (without a reference here) learns one and
			// stays unknown.
			learns := from == jobs.AttemptUnknown && v.to == jobs.AttemptRunning
			var want error
			switch {
			case legal, repeat, learns:
				want = nil
			case from == jobs.AttemptLost && v.name == "Complete":
				want = jobs.ErrLostRace // a repeated Complete by the loser gets the same answer
			default:
				want = jobs.ErrInvalidTransition
			}
			t.Run(fmt.Sprintf("%s/%s", from, v.name), func(t *testing.T) {
				e := e.with(t)
				a := e.attemptIn(from)
				beforeJob := e.job(a.JobID)
				err := v.call(e, a)
				if !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Fatalf("%s from %s = %v, want %v", v.name, from, err, want)
				}
				after := e.attempt(a.ID)
				afterJob := e.job(a.JobID)
				if learns {
					if after.State != jobs.AttemptUnknown || after.ProviderRef == "" || after.Reason != a.Reason {
						t.Errorf("attempt is %s with reference %q and reason %q after %s, want unknown with it and %q",
							after.State, after.ProviderRef, after.Reason, v.name, a.Reason)
					}
					if diff := cmp.Diff(beforeJob, afterJob); diff != "" {
						t.Errorf("%s changed the job (-before +after):\n%s", v.name, diff)
					}
					return
				}
				if legal {
					if after.State != v.to {
						t.Errorf("attempt is %s after %s, want %s", after.State, v.name, v.to)
					}
					if v.to.Terminal() == after.FinishedAt.IsZero() {
						t.Errorf("finished at %v with state %s", after.FinishedAt, after.State)
					}
					return
				}
				if diff := cmp.Diff(a, after); diff != "" {
					t.Errorf("refused or repeated %s changed the attempt (-before +after):\n%s", v.name, diff)
				}
				if diff := cmp.Diff(beforeJob, afterJob); diff != "" {
					t.Errorf("refused or repeated %s changed the job (-before +after):\n%s", v.name, diff)
				}
				var te *jobs.TransitionError
				if want == jobs.ErrInvalidTransition && (!errors.As(err, &te) || te.From != from || te.AttemptID != a.ID) {
					t.Errorf("error %v does not report the attempt's state %s", err, from)
				}
			})
		}
	}
	e.checkInvariants()
}

func testJobTransitions(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	jobIn := func(state string) jobs.Job {
		j := e.newJob()
		switch state {
		case "pending":
		case "running, attempt open":
			e.running(j.ID)
		case "running, attempts done":
			a := e.start(j.ID, "")
			e.m.Fail(e.ctx, a.ID, "declined")
		case "succeeded":
			a := e.start(j.ID, "")
			e.m.Complete(e.ctx, a.ID, json.RawMessage(`1`))
		case "failed":
			e.m.FailJob(e.ctx, j.ID, "gave up")
		case "cancelled":
			e.m.CancelJob(e.ctx, j.ID, "stop")
		}
		return e.job(j.ID)
	}
	for _, tc := range []struct {
		from    string
		verb    string
		want    error
		toState jobs.JobState
	}{
		{"pending", "FailJob", nil, jobs.JobFailed},
		{"pending", "CancelJob", nil, jobs.JobCancelled},
		{"running, attempt open", "FailJob", jobs.ErrAttemptInFlight, ""},
		{"running, attempt open", "CancelJob", nil, jobs.JobCancelled},
		{"running, attempts done", "FailJob", nil, jobs.JobFailed},
		{"running, attempts done", "CancelJob", nil, jobs.JobCancelled},
		{"succeeded", "FailJob", jobs.ErrJobClosed, ""},
		{"succeeded", "CancelJob", jobs.ErrJobClosed, ""},
		{"failed", "FailJob", nil, ""}, // a repeat
		{"failed", "CancelJob", jobs.ErrJobClosed, ""},
		{"cancelled", "CancelJob", nil, ""}, // a repeat
		{"cancelled", "FailJob", jobs.ErrJobClosed, ""},
	} {
		t.Run(tc.from+"/"+tc.verb, func(t *testing.T) {
			e := e.with(t)
			j := jobIn(tc.from)
			var got jobs.Job
			var err error
			if tc.verb == "FailJob" {
				got, err = e.m.FailJob(e.ctx, j.ID, "reason")
			} else {
				got, err = e.m.CancelJob(e.ctx, j.ID, "reason")
			}
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("%s from %s = %v, want %v", tc.verb, tc.from, err, tc.want)
			}
			after := e.job(j.ID)
			if tc.toState == "" {
				if diff := cmp.Diff(j, after); diff != "" {
					t.Errorf("%s from %s changed the job (-before +after):\n%s", tc.verb, tc.from, diff)
				}
				return
			}
			if after.State != tc.toState || after.Version != j.Version+1 || after.Reason != "reason" || after.ClosedAt.IsZero() {
				t.Errorf("job = %s v%d %q closed %v; want %s v%d", after.State, after.Version, after.Reason, after.ClosedAt, tc.toState, j.Version+1)
			}
			if diff := cmp.Diff(after, got); diff != "" {
				t.Errorf("returned job differs from stored (-stored +returned):\n%s", diff)
			}
		})
	}

	t.Run("a cancelled job drops a late result", func(t *testing.T) {
		e := e.with(t)
		j := e.newJob()
		a := e.running(j.ID)
		cancelled, err := e.m.CancelJob(e.ctx, j.ID, "user gave up")
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"late":true}`))
		if !errors.Is(err, jobs.ErrJobClosed) {
			t.Fatalf("Complete after CancelJob = %v, want ErrJobClosed", err)
		}
		if diff := cmp.Diff(cancelled, e.job(j.ID)); diff != "" {
			t.Errorf("late result changed the cancelled job:\n%s", diff)
		}
		if got := e.attempt(a.ID); got.State != jobs.AttemptCancelled {
			t.Errorf("attempt = %s, want cancelled", got.State)
		}
	})
	e.checkInvariants()
}

func testRetrySafety(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	again, created, err := e.m.Submit(e.ctx, req(j.Owner, j.Key))
	if err != nil || created || again.ID != j.ID {
		t.Fatalf("repeated Submit = %s, %v, %v", again.ID, created, err)
	}
	a := e.start(j.ID, "")
	for range 2 {
		if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-1"); err != nil {
			t.Fatalf("MarkRunning (repeat) = %v", err)
		}
	}
	res := json.RawMessage(`{"charged":1200}`)
	first, err := e.m.Complete(e.ctx, a.ID, res)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := e.m.Complete(e.ctx, a.ID, res)
		if err != nil {
			t.Fatalf("repeated Complete by the winner = %v, want success", err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("repeated Complete wrote (-first +repeat):\n%s", diff)
		}
	}
	// A context cancelled before the call makes Complete write nothing.
	j2 := e.newJob()
	b := e.start(j2.ID, "")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := e.m.Complete(ctx, b.ID, res); !errors.Is(err, context.Canceled) {
		t.Fatalf("Complete with a cancelled context = %v", err)
	}
	if got := e.attempt(b.ID); got.State != jobs.AttemptStarting {
		t.Fatalf("attempt = %s after a Complete refused up front, want starting", got.State)
	}
	e.checkInvariants()
}

func testOneInDoubt(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	j := e.newJob()
	a := e.running(j.ID)
	h := e.start(j.ID, "", jobs.Hedge()) // starting: in doubt
	_, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout")
	var inflight *jobs.AttemptInFlightError
	if !errors.As(err, &inflight) || inflight.AttemptID != h.ID {
		t.Fatalf("MarkUnknown while a hedge is starting = %v, want ErrAttemptInFlight naming %s", err, h.ID)
	}
	if got := e.attempt(a.ID); got.State != jobs.AttemptRunning {
		t.Fatalf("attempt = %s, want still running", got.State)
	}
	if _, err := e.m.MarkRunning(e.ctx, h.ID, "ref-h"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout"); err != nil {
		t.Fatalf("MarkUnknown once the hedge runs = %v", err)
	}
	e.checkInvariants()
}

// testMarkUnknownRacesHedge releases, on many jobs, callers of MarkUnknown
// on a running attempt together with the one call that moves its hedge out
// of starting. A MarkUnknown refused because the hedge was in doubt may find
// it gone a moment later: it must then try again (or name the hedge while it
// is still in doubt), and never answer with anything but this package's
// errors.
func testMarkUnknownRacesHedge(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		name   string
		settle func(e *env, hedge jobs.Attempt) error
	}{
		{"hedge acknowledged", func(e *env, h jobs.Attempt) error { _, err := e.m.MarkRunning(e.ctx, h.ID, "ref-h"); return err }},
		{"hedge failed", func(e *env, h jobs.Attempt) error { _, err := e.m.Fail(e.ctx, h.ID, "declined"); return err }},
		{"hedge cancelled", func(e *env, h jobs.Attempt) error { _, err := e.m.Cancel(e.ctx, h.ID, "stopped"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			const rounds, callers = 24, 8
			for range rounds {
				j := e.newJob()
				a := e.running(j.ID)
				h := e.start(j.ID, "", jobs.Hedge())
				errs := make([]error, callers+1)
				release(callers+1, func(i int) {
					if i == callers {
						errs[i] = tc.settle(e, h)
						return
					}
					_, errs[i] = e.m.MarkUnknown(e.ctx, a.ID, "no answer")
				})
				if errs[callers] != nil {
					t.Fatalf("settling the hedge: %v", errs[callers])
				}
				for _, err := range errs[:callers] {
					var inflight *jobs.AttemptInFlightError
					switch {
					case err == nil:
					case errors.As(err, &inflight):
						if inflight.AttemptID != h.ID || inflight.State != jobs.AttemptStarting {
							t.Errorf("MarkUnknown refused naming %s (%s), want the starting hedge %s", inflight.AttemptID, inflight.State, h.ID)
						}
					default:
						t.Errorf("MarkUnknown racing the hedge = %v (%T), want nil or ErrAttemptInFlight", err, err)
					}
				}
				// The hedge has moved on: nothing blocks the move any more.
				if got, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer"); err != nil || got.State != jobs.AttemptUnknown {
					t.Fatalf("MarkUnknown once the hedge settled = %s, %v", got.State, err)
				}
			}
		})
	}
	e.checkInvariants()
}

// events records a Manager's events.
type events struct {
	mu  sync.Mutex
	all []jobs.Event
}

func (ev *events) Observe(_ context.Context, e jobs.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.all = append(ev.all, e)
}

// count returns how many events of type typ concern the attempt.
func (ev *events) count(typ jobs.EventType, attemptID string) int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	n := 0
	for _, e := range ev.all {
		if e.Type == typ && e.AttemptID == attemptID {
			n++
		}
	}
	return n
}

// testUnknownLearnsReference: an acknowledgement that arrives after the
// attempt became unknown records the provider's reference, once; the
// attempt stays unknown, and still blocks the job.
func testUnknownLearnsReference(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	ev := &events{}
	e := setup(t, newStore, func(o *jobs.Options) { o.Observer = ev })
	unknown := func(e *env, ref string) jobs.Attempt {
		e.t.Helper()
		a := e.start(e.newJob().ID, "")
		if ref != "" {
			if _, err := e.m.MarkRunning(e.ctx, a.ID, ref); err != nil {
				e.t.Fatalf("MarkRunning: %v", err)
			}
		}
		if _, err := e.m.MarkUnknown(e.ctx, a.ID, "no answer after 30s"); err != nil {
			e.t.Fatalf("MarkUnknown: %v", err)
		}
		return e.attempt(a.ID)
	}
	for _, tc := range []struct {
		name    string
		given   func(e *env) jobs.Attempt
		ref     string
		wantErr error
		wantRef string
		learns  bool // the reference is recorded by this call
	}{
		{"without a reference, learns it", func(e *env) jobs.Attempt { return unknown(e, "") }, "ref-late", nil, "ref-late", true},
		{"the learned reference again", func(e *env) jobs.Attempt {
			a := unknown(e, "")
			if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-late"); err != nil {
				e.t.Fatal(err)
			}
			return e.attempt(a.ID)
		}, "ref-late", nil, "ref-late", false},
		{"another than the learned reference", func(e *env) jobs.Attempt {
			a := unknown(e, "")
			if _, err := e.m.MarkRunning(e.ctx, a.ID, "ref-late"); err != nil {
				e.t.Fatal(err)
			}
			return e.attempt(a.ID)
		}, "ref-other", jobs.ErrInvalidTransition, "ref-late", false},
		{"the reference recorded at running again", func(e *env) jobs.Attempt { return unknown(e, "ref-1") }, "ref-1", nil, "ref-1", false},
		{"another than the reference recorded at running", func(e *env) jobs.Attempt { return unknown(e, "ref-1") }, "ref-2", jobs.ErrInvalidTransition, "ref-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.with(t)
			a := tc.given(e)
			beforeJob := e.job(a.JobID)
			before := ev.count(jobs.EventReferenceRecorded, a.ID)
			e.clock.Advance(time.Second)
			got, err := e.m.MarkRunning(e.ctx, a.ID, tc.ref)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("MarkRunning(%q) on an unknown attempt = %v, want %v", tc.ref, err, tc.wantErr)
			}
			var te *jobs.TransitionError
			if tc.wantErr != nil && (!errors.As(err, &te) || te.AttemptID != a.ID || te.From != jobs.AttemptUnknown || te.To != jobs.AttemptRunning || te.Detail == "") {
				t.Errorf("error %#v does not say that another reference is recorded", err)
			}
			after := e.attempt(a.ID)
			if after.State != jobs.AttemptUnknown || after.ProviderRef != tc.wantRef || after.Reason != a.Reason || !after.FinishedAt.IsZero() {
				t.Errorf("attempt is %s, reference %q, reason %q, finished %v; want unknown, %q, %q, not finished",
					after.State, after.ProviderRef, after.Reason, after.FinishedAt, tc.wantRef, a.Reason)
			}
			if tc.learns {
				if !after.UpdatedAt.Equal(e.clock.Now()) {
					t.Errorf("updated at %v, want %v", after.UpdatedAt, e.clock.Now())
				}
				if diff := cmp.Diff(after, got); diff != "" {
					t.Errorf("returned attempt differs from stored (-stored +returned):\n%s", diff)
				}
			} else if diff := cmp.Diff(a, after); diff != "" {
				t.Errorf("a repeated or refused MarkRunning changed the attempt (-before +after):\n%s", diff)
			}
			want := 0
			if tc.learns {
				want = 1
			}
			if n := ev.count(jobs.EventReferenceRecorded, a.ID) - before; n != want {
				t.Errorf("%d %s events, want %d", n, jobs.EventReferenceRecorded, want)
			}
			if diff := cmp.Diff(beforeJob, e.job(a.JobID)); diff != "" {
				t.Errorf("MarkRunning changed the job (-before +after):\n%s", diff)
			}
			// Still in doubt: no new attempt, not even a hedge.
			var inflight *jobs.AttemptInFlightError
			if _, err := e.m.StartAttempt(e.ctx, a.JobID, "", jobs.Hedge()); !errors.As(err, &inflight) || inflight.AttemptID != a.ID {
				t.Errorf("StartAttempt past the unknown attempt = %v, want ErrAttemptInFlight naming it", err)
			}
		})
	}
	e.checkInvariants()
}

// testReferenceRace releases acknowledgements with different references
// together, on a starting and on an unknown attempt: exactly one reference
// is recorded, and every other call is refused.
func testReferenceRace(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	for _, tc := range []struct {
		from, to jobs.AttemptState
	}{
		{jobs.AttemptStarting, jobs.AttemptRunning},
		{jobs.AttemptUnknown, jobs.AttemptUnknown},
	} {
		t.Run(string(tc.from), func(t *testing.T) {
			e := e.with(t)
			a := e.start(e.newJob().ID, "")
			if tc.from == jobs.AttemptUnknown {
				if _, err := e.m.MarkUnknown(e.ctx, a.ID, "timeout"); err != nil {
					t.Fatal(err)
				}
			}
			const n = 32
			errs := make([]error, n)
			release(n, func(i int) {
				_, errs[i] = e.m.MarkRunning(e.ctx, a.ID, fmt.Sprintf("ref-%d", i))
			})
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner < 0:
					winner = i
				case err == nil:
					t.Errorf("references %d and %d were both accepted", winner, i)
				case !errors.Is(err, jobs.ErrInvalidTransition):
					t.Errorf("MarkRunning %d = %v, want nil or ErrInvalidTransition", i, err)
				}
			}
			after := e.attempt(a.ID)
			if winner < 0 || after.State != tc.to || after.ProviderRef != fmt.Sprintf("ref-%d", winner) {
				t.Errorf("attempt is %s with reference %q; accepted call %d, want %s with its reference", after.State, after.ProviderRef, winner, tc.to)
			}
		})
	}
	e.checkInvariants()
}

func testSubmitTx(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	s, ok := e.store.(interface{ DB() *sql.DB })
	if !ok {
		// A store without a database of the caller's cannot join a
		// caller's transaction: it must say so, and write nothing.
		_, _, err := e.m.SubmitTx(e.ctx, nil, req("owner-1", "tx"))
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("SubmitTx on %T, which has no DB(): %v, want errors.ErrUnsupported", e.store, err)
		}
		if n := e.countJobs(); n != 0 {
			t.Fatalf("an unsupported SubmitTx left %d jobs", n)
		}
		return
	}
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			e := e.with(t)
			key := fmt.Sprintf("tx-%v", commit)
			tx, err := s.DB().BeginTx(e.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			j, created, err := e.m.SubmitTx(e.ctx, tx, req("owner-1", key))
			if err != nil || !created {
				tx.Rollback()
				t.Fatalf("SubmitTx = %v, %v", created, err)
			}
			again, created, err := e.m.SubmitTx(e.ctx, tx, req("owner-1", key))
			if err != nil || created || again.ID != j.ID {
				tx.Rollback()
				t.Fatalf("second SubmitTx in the same transaction = %s, %v, %v", again.ID, created, err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.m.GetByKey(e.ctx, "owner-1", key)
			switch {
			case commit && (err != nil || got.ID != j.ID):
				t.Errorf("after commit: GetByKey = %s, %v; want %s", got.ID, err, j.ID)
			case !commit && !errors.Is(err, jobs.ErrNotFound):
				t.Errorf("after rollback: GetByKey = %s, %v; want ErrNotFound", got.ID, err)
			}
		})
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
