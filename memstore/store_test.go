package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

// fixture is a memory store with a little of everything in it, written
// through a Manager on a manual clock.
type fixture struct {
	ctx   context.Context
	s     *memstore.Store
	m     *jobs.Manager
	clock *jobstest.Clock

	pending   jobs.Job     // no attempt yet
	running   jobs.Job     // its attempt is running, claimed with "tok-1"
	attempt   jobs.Attempt // that attempt
	succeeded jobs.Job     // completed by its one attempt
	verified  jobs.Verification
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ctx: t.Context(), s: memstore.New(), clock: jobstest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	f.m = jobstest.NewManager(t, f.s, jobs.Options{Clock: f.clock, Logger: slog.New(slog.DiscardHandler),
		Contracts: map[string]jobs.Contract{"charge": chargeContract}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var err error
	f.pending = f.submit(t, "pending")
	f.running = f.submit(t, "running")
	f.attempt, err = f.m.StartAttempt(f.ctx, f.running.ID, "")
	must(err)
	f.attempt, err = f.m.MarkRunning(f.ctx, f.attempt.ID, "ref-1")
	must(err)
	_, ok, err := f.s.ClaimAttempt(f.ctx, jobs.AttemptClaim{ID: f.attempt.ID, State: f.attempt.State, UpdatedAt: f.attempt.UpdatedAt,
		Token: "tok-1", At: f.clock.Now(), Until: f.clock.Now().Add(time.Minute)})
	if !ok {
		t.Fatalf("ClaimAttempt = %v, %v", ok, err)
	}
	f.succeeded = f.submit(t, "succeeded")
	a, err := f.m.StartAttempt(f.ctx, f.succeeded.ID, "")
	must(err)
	f.succeeded, err = f.m.Complete(f.ctx, a.ID, json.RawMessage(`{"charged":1200}`))
	must(err)
	f.verified, err = f.m.VerifyProvider(f.ctx, "backup", "charge", func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"charged":0}`), nil
	})
	must(err)
	f.clock.Advance(time.Second)
	return f
}

func (f *fixture) submit(t *testing.T, key string) jobs.Job {
	t.Helper()
	j, _, err := f.m.Submit(f.ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200}`)})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// contents is everything the store holds: jobs, attempts, verifications,
// and (through StaleAttempts) which attempts are claimed until when.
type contents struct {
	Snapshot      *invariant.Snapshot
	Verifications []jobs.Verification
	Unclaimed     map[time.Duration][]jobs.Attempt // open attempts not claimed beyond now plus the key
}

func (f *fixture) contents(t *testing.T) contents {
	t.Helper()
	ctx := context.Background()
	snap, err := invariant.TakeSnapshot(ctx, f.s)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := f.s.Verifications(ctx, jobs.VerificationFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	c := contents{Snapshot: snap, Verifications: vs, Unclaimed: map[time.Duration][]jobs.Attempt{}}
	end := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{0, time.Minute, time.Hour} {
		c.Unclaimed[d], err = f.s.StaleAttempts(ctx, jobs.StaleQuery{UnknownBefore: end, OpenBefore: end, UnclaimedAt: f.clock.Now().Add(d), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// unchanged fails t if the store's contents differ from before.
func (f *fixture) unchanged(t *testing.T, before contents, what string) {
	t.Helper()
	if diff := cmp.Diff(before, f.contents(t)); diff != "" {
		t.Errorf("%s wrote (-before +after):\n%s", what, diff)
	}
}

// Bad input is refused with an *InputError naming the field, as a
// database's constraints would refuse it, and nothing is written.
func TestRefusesBadInputAndWritesNothing(t *testing.T) {
	tests := []struct {
		name  string
		field string
		call  func(f *fixture) error
	}{
		{"CreateJob without an ID", "ID", func(f *fixture) error { return f.createJob("", "new", `{}`) }},
		{"CreateJob with another job's ID", "ID", func(f *fixture) error { return f.createJob(f.pending.ID, "new", `{}`) }},
		{"CreateJob with params not JSON", "Params", func(f *fixture) error { return f.createJob("job_new", "new", `{amount:1}`) }},
		{"CreateJob without params", "Params", func(f *fixture) error { return f.createJob("job_new", "new", ``) }},
		{"CreateAttempt without an ID", "ID", func(f *fixture) error { return f.createAttempt("") }},
		{"CreateAttempt with another attempt's ID", "ID", func(f *fixture) error { return f.createAttempt(f.attempt.ID) }},
		{"CompleteAttempt with a result not JSON", "Result", func(f *fixture) error { return f.complete(`{"charged":`) }},
		{"CompleteAttempt without a result", "Result", func(f *fixture) error { return f.complete(``) }},
		{"RecordVerification without an ID", "ID", func(f *fixture) error { return f.recordVerification("") }},
		{"RecordVerification with another's ID", "ID", func(f *fixture) error { return f.recordVerification(f.verified.ID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			before := f.contents(t)
			err := tt.call(f)
			var in *jobs.InputError
			if !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &in) || in.Field != tt.field {
				t.Errorf("got %v, want an *InputError for %s", err, tt.field)
			}
			f.unchanged(t, before, "a refused call")
		})
	}
}

func (f *fixture) createJob(id, key, params string) error {
	_, _, err := f.s.CreateJob(f.ctx, jobs.Job{ID: id, Owner: "o", Key: key, Kind: "charge", Provider: "acme",
		Params: json.RawMessage(params), Fingerprint: "fp", CreatedAt: f.clock.Now()})
	return err
}

func (f *fixture) createAttempt(id string) error {
	_, err := f.s.CreateAttempt(f.ctx, jobs.NewAttempt{ID: id, JobID: f.pending.ID, At: f.clock.Now()})
	return err
}

func (f *fixture) complete(result string) error {
	_, _, err := f.s.CompleteAttempt(f.ctx, jobs.Completion{AttemptID: f.attempt.ID, Result: json.RawMessage(result), At: f.clock.Now()})
	return err
}

func (f *fixture) recordVerification(id string) error {
	return f.s.RecordVerification(f.ctx, jobs.Verification{ID: id, Provider: "backup", Kind: "charge",
		ContractVersion: "v1", Passed: true, VerifiedAt: f.clock.Now()})
}

// What a caller gets is a copy, and what it gives is copied: changing
// either afterwards changes nothing stored.
func TestSharesNoMemoryWithCallers(t *testing.T) {
	f := newFixture(t)
	params := json.RawMessage(`{"amount":7}`)
	j, created, err := f.s.CreateJob(f.ctx, jobs.Job{ID: "job_copies", Owner: "o", Key: "copies", Kind: "charge", Provider: "acme",
		Params: params, Fingerprint: "fp", CreatedAt: f.clock.Now()})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	a, err := f.s.CreateAttempt(f.ctx, jobs.NewAttempt{ID: "att_copies", JobID: j.ID, At: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	result := json.RawMessage(`{"charged":7}`)
	done, _, err := f.s.CompleteAttempt(f.ctx, jobs.Completion{AttemptID: a.ID, Result: result, At: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.s.Job(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	scribble := func(raws ...json.RawMessage) {
		for _, r := range raws {
			if len(r) > 0 {
				r[0] = 'X'
			}
		}
	}
	scribble(params, result, j.Params, done.Params, done.Result, want.Params, want.Result)
	replay, _, _ := f.s.CreateJob(f.ctx, jobs.Job{ID: "job_other", Owner: "o", Key: "copies", Params: json.RawMessage(`1`)})
	byKey, _ := f.s.JobByKey(f.ctx, "o", "copies")
	listed, _ := f.s.ListJobs(f.ctx, jobs.JobQuery{})
	for _, l := range listed {
		scribble(l.Params, l.Result)
	}
	scribble(replay.Params, replay.Result, byKey.Params, byKey.Result)

	got, err := f.s.Job(f.ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Params) != `{"amount":7}` || string(got.Result) != `{"charged":7}` {
		t.Errorf("stored job holds params %s and result %s after callers changed their copies; want {\"amount\":7} and {\"charged\":7}",
			got.Params, got.Result)
	}
}

// A call whose context is done runs nothing, as a database call would not
// start, and returns the context's error.
func TestCancelledContextRunsNothing(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, f *fixture) error
	}{
		{"CreateJob", func(ctx context.Context, f *fixture) error {
			_, _, err := f.s.CreateJob(ctx, jobs.Job{ID: "job_new", Owner: "o", Key: "new", Params: json.RawMessage(`{}`), CreatedAt: f.clock.Now()})
			return err
		}},
		{"Job", func(ctx context.Context, f *fixture) error { _, err := f.s.Job(ctx, f.pending.ID); return err }},
		{"JobByKey", func(ctx context.Context, f *fixture) error { _, err := f.s.JobByKey(ctx, "o", "pending"); return err }},
		{"ListJobs", func(ctx context.Context, f *fixture) error {
			_, err := f.s.ListJobs(ctx, jobs.JobQuery{Limit: 10})
			return err
		}},
		{"CloseJob", func(ctx context.Context, f *fixture) error {
			_, err := f.s.CloseJob(ctx, jobs.JobClose{ID: f.pending.ID, To: jobs.JobCancelled, At: f.clock.Now()})
			return err
		}},
		{"Attempt", func(ctx context.Context, f *fixture) error { _, err := f.s.Attempt(ctx, f.attempt.ID); return err }},
		{"Attempts", func(ctx context.Context, f *fixture) error { _, err := f.s.Attempts(ctx, f.running.ID); return err }},
		{"CreateAttempt", func(ctx context.Context, f *fixture) error {
			_, err := f.s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_new", JobID: f.pending.ID, At: f.clock.Now()})
			return err
		}},
		{"UpdateAttempt", func(ctx context.Context, f *fixture) error {
			_, err := f.s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: f.attempt.ID, From: []jobs.AttemptState{jobs.AttemptRunning},
				To: jobs.AttemptUnknown, At: f.clock.Now()})
			return err
		}},
		{"CompleteAttempt", func(ctx context.Context, f *fixture) error {
			_, _, err := f.s.CompleteAttempt(ctx, jobs.Completion{AttemptID: f.attempt.ID, Result: json.RawMessage(`1`), At: f.clock.Now()})
			return err
		}},
		{"StaleAttempts", func(ctx context.Context, f *fixture) error {
			_, err := f.s.StaleAttempts(ctx, jobs.StaleQuery{OpenBefore: f.clock.Now()})
			return err
		}},
		{"ClaimAttempt", func(ctx context.Context, f *fixture) error {
			_, _, err := f.s.ClaimAttempt(ctx, jobs.AttemptClaim{ID: f.attempt.ID, State: f.attempt.State, UpdatedAt: f.attempt.UpdatedAt,
				Token: "tok-2", At: f.clock.Now().Add(time.Hour), Until: f.clock.Now().Add(2 * time.Hour)})
			return err
		}},
		{"RenewClaim", func(ctx context.Context, f *fixture) error {
			_, err := f.s.RenewClaim(ctx, jobs.AttemptClaim{ID: f.attempt.ID, Token: "tok-1", Until: f.clock.Now().Add(time.Hour)})
			return err
		}},
		{"RecordVerification", func(ctx context.Context, f *fixture) error {
			return f.s.RecordVerification(ctx, jobs.Verification{ID: "ver_new", Provider: "p", Kind: "charge", VerifiedAt: f.clock.Now()})
		}},
		{"Verifications", func(ctx context.Context, f *fixture) error {
			_, err := f.s.Verifications(ctx, jobs.VerificationFilter{})
			return err
		}},
		{"PurgeJobs", func(ctx context.Context, f *fixture) error {
			_, err := f.s.PurgeJobs(ctx, jobs.PurgeQuery{Before: f.clock.Now(), Limit: 10})
			return err
		}},
		{"NotifyClosed", func(ctx context.Context, f *fixture) error {
			_, _, err := f.s.NotifyClosed(ctx, f.pending.ID)
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			before := f.contents(t)
			ctx, cancel := context.WithCancel(f.ctx)
			cancel()
			if err := c.call(ctx, f); !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a cancelled context = %v, want context.Canceled", c.name, err)
			}
			f.unchanged(t, before, c.name+" with a cancelled context")
			if err := c.call(f.ctx, f); err != nil {
				t.Errorf("%s with a live context = %v: the case proves nothing", c.name, err)
			}
		})
	}
}

// NotifyClosed wakes every waiter of a job when it closes, however it
// closes, and no waiter of another job; writes that leave the job open
// wake nobody.
func TestNotifyClosedWakesTheWaitersOfTheClosedJob(t *testing.T) {
	tests := []struct {
		name  string
		close func(f *fixture, j jobs.Job) error
	}{
		{"completed", func(f *fixture, j jobs.Job) error {
			a, err := f.m.StartAttempt(f.ctx, j.ID, "")
			if err != nil {
				return err
			}
			if _, err := f.m.MarkRunning(f.ctx, a.ID, "ref-x"); err != nil { // leaves the job open
				return err
			}
			_, err = f.m.Complete(f.ctx, a.ID, json.RawMessage(`{"charged":1}`))
			return err
		}},
		{"failed", func(f *fixture, j jobs.Job) error { _, err := f.m.FailJob(f.ctx, j.ID, "gave up"); return err }},
		{"cancelled", func(f *fixture, j jobs.Job) error { _, err := f.m.CancelJob(f.ctx, j.ID, "user left"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			listen := func(j jobs.Job) <-chan struct{} {
				wake, stop, err := f.s.NotifyClosed(f.ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
				return wake
			}
			woken := func(c <-chan struct{}) bool {
				select {
				case <-c:
					return true
				default:
					return false
				}
			}
			j := f.submit(t, "watched")
			first, second, other := listen(j), listen(j), listen(f.pending)
			if woken(first) {
				t.Fatal("woken before the job closed")
			}
			if err := tt.close(f, j); err != nil {
				t.Fatal(err)
			}
			if !woken(first) || !woken(second) {
				t.Errorf("a waiter of the job was not woken when it %s", tt.name)
			}
			if woken(other) {
				t.Errorf("the waiter of another job was woken")
			}
			if got, err := f.m.Wait(f.ctx, j.ID); err != nil || !got.State.Terminal() {
				t.Errorf("Wait = %s, %v; want the closed job", got.State, err)
			}
		})
	}
}
