package jobstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
)

// What every case is given: a fresh store and a Manager on a manual
// clock (setup), the helpers that drive them and fail the test on an
// unexpected error, the readers that see everything the store holds, and
// release, which lets goroutines race.

// env is what one case needs.
type env struct {
	t     *testing.T
	ctx   context.Context
	store jobs.Store // recorded, when JOBS_HISTORY_DIR is set
	raw   jobs.Store // the store itself, for what the recorder does not pass on (DB)
	m     *jobs.Manager
	clock *Clock
}

// setup returns a fresh store and a Manager over it. When
// JOBS_HISTORY_DIR is set, every call the case makes to the store, from
// every goroutine, is recorded as one history (see Recorder).
func setup(t *testing.T, newStore func(t testing.TB) jobs.Store, opts ...func(*jobs.Options)) *env {
	t.Helper()
	raw := newStore(t)
	return newEnv(t, raw, NewRecorder(t).Store(raw, "conformance"), opts...)
}

// setupUnrecorded is setup for a case whose history the linearizability
// checker would misjudge, or cannot decide in time: nothing is recorded.
// Each caller says why.
func setupUnrecorded(t *testing.T, newStore func(t testing.TB) jobs.Store, opts ...func(*jobs.Options)) *env {
	t.Helper()
	raw := newStore(t)
	return newEnv(t, raw, raw, opts...)
}

func newEnv(t *testing.T, raw, s jobs.Store, opts ...func(*jobs.Options)) *env {
	t.Helper()
	clock := NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o := jobs.Options{Clock: clock, Logger: discardLogger()}
	for _, f := range opts {
		f(&o)
	}
	return &env{t: t, ctx: t.Context(), store: s, raw: raw, m: NewManager(t, s, o), clock: clock}
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

// jobIn returns a job under key in state s: pending, running (an attempt
// running), succeeded, failed (given up) or cancelled.
func (e *env) jobIn(key string, s jobs.JobState) jobs.Job {
	e.t.Helper()
	j := e.submit(req("owner-1", key))
	var err error
	switch s {
	case jobs.JobPending:
		return j
	case jobs.JobRunning:
		e.running(j.ID)
	case jobs.JobSucceeded:
		a := e.start(j.ID, "")
		_, err = e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"ok":true}`))
	case jobs.JobFailed:
		a := e.start(j.ID, "")
		if _, err = e.m.Fail(e.ctx, a.ID, "declined"); err == nil {
			_, err = e.m.FailJob(e.ctx, j.ID, "gave up")
		}
	case jobs.JobCancelled:
		_, err = e.m.CancelJob(e.ctx, j.ID, "stop")
	}
	if err != nil {
		e.t.Fatalf("job in state %s: %v", s, err)
	}
	return e.job(j.ID)
}

// cancelledWith returns a job under key that was cancelled while its one
// attempt is in state s (starting, running or unknown), and that attempt.
func (e *env) cancelledWith(key string, s jobs.AttemptState) (jobs.Job, jobs.Attempt) {
	e.t.Helper()
	j := e.submit(reuseReq(key, jobs.KeyReuseAfterFailureOrCancel))
	a := e.start(j.ID, "")
	var err error
	switch s {
	case jobs.AttemptRunning:
		a, err = e.m.MarkRunning(e.ctx, a.ID, "ref-"+a.ID)
	case jobs.AttemptUnknown:
		a, err = e.m.MarkUnknown(e.ctx, a.ID, "timed out")
	}
	if err == nil {
		_, err = e.m.CancelJob(e.ctx, j.ID, "the user gave up")
	}
	if err != nil {
		e.t.Fatalf("job cancelled with its attempt %s: %v", s, err)
	}
	return e.job(j.ID), a
}

// countJobs counts every job in the store.
func (e *env) countJobs() int {
	e.t.Helper()
	return len(e.snapshot().Jobs)
}

// snapshot returns every job and attempt the store holds.
func (e *env) snapshot() *invariant.Snapshot {
	e.t.Helper()
	snap, err := invariant.TakeSnapshot(e.ctx, e.readable())
	if err != nil {
		e.t.Fatalf("snapshot: %v", err)
	}
	return snap
}

// unchanged fails the test if the store's jobs or attempts differ from
// before.
func (e *env) unchanged(before *invariant.Snapshot, what string) {
	e.t.Helper()
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		e.t.Errorf("%s wrote (-before +after):\n%s", what, diff)
	}
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

// has reports whether an event with want's Type, JobID and Replaces was
// observed.
func (ev *events) has(want jobs.Event) bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.all {
		if e.Type == want.Type && e.JobID == want.JobID && e.Replaces == want.Replaces {
			return true
		}
	}
	return false
}

// size is full when JOBS_TEST_LONG is 1 (as in CI), quick otherwise: the
// number of rounds of a race that repeats to make a rare interleaving
// likely. Every round asserts the same; more rounds only find more.
func size(full, quick int) int {
	if os.Getenv("JOBS_TEST_LONG") == "1" {
		return full
	}
	return quick
}
