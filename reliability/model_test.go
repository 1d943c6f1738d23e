package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// The model is the reference: a few lines per verb that say what the
// contract promises, with no database and no concurrency.
type modelAttempt struct {
	id    string
	state jobs.AttemptState
	ref   string
	base  int64
}

type modelJob struct {
	id          string
	key         string
	params      string
	state       jobs.JobState
	version     int64
	completedBy string
	result      string
	attempts    []*modelAttempt
}

func (j *modelJob) blocker(hedge bool) *modelAttempt {
	for _, a := range j.attempts {
		if a.state.InDoubt() {
			return a
		}
	}
	for _, a := range j.attempts {
		if a.state == jobs.AttemptRunning && !hedge {
			return a
		}
	}
	return nil
}

func (j *modelJob) otherInDoubt(a *modelAttempt) bool {
	for _, b := range j.attempts {
		if b != a && b.state.InDoubt() {
			return true
		}
	}
	return false
}

// machine drives one store and the model with the same random operations.
type machine struct {
	ctx   context.Context
	store testdb.Store
	m     *jobs.Manager
	owner string

	jobs     []*modelJob
	byKey    map[string]*modelJob
	attempts []*modelAttempt
	jobOf    map[*modelAttempt]*modelJob
	prev     *invariant.Snapshot
	results  int
}

func (s *machine) pickJob(t *rapid.T) *modelJob {
	if len(s.jobs) == 0 {
		t.Skip("no job yet")
	}
	return s.jobs[rapid.IntRange(0, len(s.jobs)-1).Draw(t, "job")]
}

func (s *machine) pickAttempt(t *rapid.T) (*modelJob, *modelAttempt) {
	if len(s.attempts) == 0 {
		t.Skip("no attempt yet")
	}
	a := s.attempts[rapid.IntRange(0, len(s.attempts)-1).Draw(t, "attempt")]
	return s.jobOf[a], a
}

// wantErr fails t unless err matches want (nil: no error).
func wantErr(t *rapid.T, op string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, model expects %v", op, err, want)
	}
}

func (s *machine) Submit(t *rapid.T) {
	key := rapid.SampledFrom([]string{"k1", "k2", "k3", "k4"}).Draw(t, "key")
	params := rapid.SampledFrom([]string{`{"a":1}`, `{ "a" : 1 }`, `{"a":2}`}).Draw(t, "params")
	canon := params
	if canon == `{ "a" : 1 }` {
		canon = `{"a":1}`
	}
	j, created, err := s.m.Submit(s.ctx, jobs.SubmitRequest{Owner: s.owner, Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(params)})
	mj, known := s.byKey[key]
	switch {
	case !known:
		wantErr(t, "submit", err, nil)
		if !created {
			t.Fatalf("submit of a new key: created=false")
		}
		mj = &modelJob{id: j.ID, key: key, params: canon, state: jobs.JobPending, version: 1}
		s.byKey[key] = mj
		s.jobs = append(s.jobs, mj)
	case mj.params != canon:
		wantErr(t, "submit", err, jobs.ErrKeyConflict)
		var kc *jobs.KeyConflictError
		if errors.As(err, &kc) && kc.JobID != mj.id {
			t.Fatalf("key conflict names %s, want %s", kc.JobID, mj.id)
		}
	default:
		wantErr(t, "submit", err, nil)
		if created || j.ID != mj.id {
			t.Fatalf("replayed submit: created=%v id %s, want %s", created, j.ID, mj.id)
		}
	}
}

func (s *machine) StartAttempt(t *rapid.T) {
	mj := s.pickJob(t)
	hedge := rapid.Bool().Draw(t, "hedge")
	var opts []jobs.AttemptOption
	if hedge {
		opts = append(opts, jobs.Hedge())
	}
	a, err := s.m.StartAttempt(s.ctx, mj.id, "", opts...)
	switch b := mj.blocker(hedge); {
	case mj.state.Terminal():
		wantErr(t, "start attempt", err, jobs.ErrJobClosed)
	case b != nil:
		wantErr(t, "start attempt", err, jobs.ErrAttemptInFlight)
		var inFlight *jobs.AttemptInFlightError
		if errors.As(err, &inFlight) && inFlight.AttemptID != b.id {
			t.Fatalf("blocked by %s, model says %s", inFlight.AttemptID, b.id)
		}
	default:
		wantErr(t, "start attempt", err, nil)
		ma := &modelAttempt{id: a.ID, state: jobs.AttemptStarting, base: mj.version}
		mj.state = jobs.JobRunning
		mj.attempts = append(mj.attempts, ma)
		s.attempts = append(s.attempts, ma)
		s.jobOf[ma] = mj
	}
}

func (s *machine) MarkRunning(t *rapid.T) {
	_, ma := s.pickAttempt(t)
	ref := rapid.SampledFrom([]string{"r1", "r2"}).Draw(t, "ref")
	_, err := s.m.MarkRunning(s.ctx, ma.id, ref)
	switch {
	case ma.state == jobs.AttemptStarting:
		wantErr(t, "mark running", err, nil)
		ma.state, ma.ref = jobs.AttemptRunning, ref
	case ma.state == jobs.AttemptRunning && ma.ref == ref:
		wantErr(t, "mark running (repeat)", err, nil)
	case ma.state == jobs.AttemptUnknown && (ma.ref == "" || ma.ref == ref):
		// A late acknowledgement: the reference is recorded, once; the
		// attempt stays in doubt.
		wantErr(t, "mark running (unknown)", err, nil)
		ma.ref = ref
	default:
		wantErr(t, "mark running", err, jobs.ErrInvalidTransition)
	}
}

func (s *machine) MarkUnknown(t *rapid.T) {
	mj, ma := s.pickAttempt(t)
	_, err := s.m.MarkUnknown(s.ctx, ma.id, "timeout")
	switch {
	case ma.state == jobs.AttemptUnknown:
		wantErr(t, "mark unknown (repeat)", err, nil)
	case !ma.state.Open():
		wantErr(t, "mark unknown", err, jobs.ErrInvalidTransition)
	case mj.otherInDoubt(ma):
		wantErr(t, "mark unknown", err, jobs.ErrAttemptInFlight)
	default:
		wantErr(t, "mark unknown", err, nil)
		ma.state = jobs.AttemptUnknown
	}
}

func (s *machine) Complete(t *rapid.T) {
	mj, ma := s.pickAttempt(t)
	s.results++
	result := fmt.Sprintf(`{"n":%d}`, s.results)
	j, err := s.m.Complete(s.ctx, ma.id, json.RawMessage(result))
	switch {
	case ma.state.Open() && mj.state == jobs.JobRunning && mj.completedBy == "" && mj.version == ma.base:
		wantErr(t, "complete", err, nil)
		ma.state = jobs.AttemptSucceeded
		mj.state, mj.completedBy, mj.result = jobs.JobSucceeded, ma.id, result
		mj.version++
		if j.CompletedBy != ma.id || string(j.Result) != result {
			t.Fatalf("complete returned job completed by %s with %s", j.CompletedBy, j.Result)
		}
	case ma.state.Open() && mj.completedBy != "":
		wantErr(t, "complete (late)", err, jobs.ErrLostRace)
		ma.state = jobs.AttemptLost
	case ma.state.Open():
		wantErr(t, "complete (closed job)", err, jobs.ErrJobClosed)
		ma.state = jobs.AttemptCancelled
	case ma.state == jobs.AttemptSucceeded:
		wantErr(t, "complete (repeat by the winner)", err, nil)
		if string(j.Result) != mj.result {
			t.Fatalf("repeat by the winner returned result %s, want the stored %s", j.Result, mj.result)
		}
	case ma.state == jobs.AttemptLost:
		wantErr(t, "complete (repeat by a loser)", err, jobs.ErrLostRace)
	case ma.state == jobs.AttemptCancelled && (mj.state == jobs.JobCancelled || mj.state == jobs.JobFailed):
		wantErr(t, "complete (job closed)", err, jobs.ErrJobClosed)
	default:
		wantErr(t, "complete", err, jobs.ErrInvalidTransition)
	}
}

func (s *machine) settle(t *rapid.T, to jobs.AttemptState) {
	_, ma := s.pickAttempt(t)
	var err error
	if to == jobs.AttemptFailed {
		_, err = s.m.Fail(s.ctx, ma.id, "no")
	} else {
		_, err = s.m.Cancel(s.ctx, ma.id, "stop")
	}
	switch {
	case ma.state.Open():
		wantErr(t, string(to), err, nil)
		ma.state = to
	case ma.state == to:
		wantErr(t, string(to)+" (repeat)", err, nil)
	default:
		wantErr(t, string(to), err, jobs.ErrInvalidTransition)
	}
}

func (s *machine) Fail(t *rapid.T)   { s.settle(t, jobs.AttemptFailed) }
func (s *machine) Cancel(t *rapid.T) { s.settle(t, jobs.AttemptCancelled) }

func (s *machine) CancelJob(t *rapid.T) {
	mj := s.pickJob(t)
	j, err := s.m.CancelJob(s.ctx, mj.id, "stop")
	switch {
	case !mj.state.Terminal():
		wantErr(t, "cancel job", err, nil)
		mj.state = jobs.JobCancelled
		mj.version++
	case mj.state == jobs.JobCancelled:
		wantErr(t, "cancel job (repeat)", err, nil)
	default:
		wantErr(t, "cancel job", err, jobs.ErrJobClosed)
	}
	if err == nil && (j.State != jobs.JobCancelled || j.Version != mj.version) {
		t.Fatalf("cancel job returned %s v%d, want cancelled v%d", j.State, j.Version, mj.version)
	}
}

func (s *machine) FailJob(t *rapid.T) {
	mj := s.pickJob(t)
	_, err := s.m.FailJob(s.ctx, mj.id, "gave up")
	open := slices.ContainsFunc(mj.attempts, func(a *modelAttempt) bool { return a.state.Open() })
	switch {
	case mj.state == jobs.JobFailed:
		wantErr(t, "fail job (repeat)", err, nil)
	case mj.state.Terminal():
		wantErr(t, "fail job", err, jobs.ErrJobClosed)
	case open:
		wantErr(t, "fail job", err, jobs.ErrAttemptInFlight)
	default:
		wantErr(t, "fail job", err, nil)
		mj.state = jobs.JobFailed
		mj.version++
	}
}

// Check compares the store with the model and runs the invariant checker
// on this run's jobs, and the transition checker against the last step.
func (s *machine) Check(t *rapid.T) {
	snap := &invariant.Snapshot{Attempts: map[string][]jobs.Attempt{}}
	for _, mj := range s.jobs {
		j, err := s.store.Job(s.ctx, mj.id)
		if err != nil {
			t.Fatalf("job %s: %v", mj.id, err)
		}
		as, err := s.store.Attempts(s.ctx, mj.id)
		if err != nil {
			t.Fatalf("attempts of %s: %v", mj.id, err)
		}
		snap.Jobs = append(snap.Jobs, j)
		snap.Attempts[j.ID] = as
		if j.State != mj.state || j.Version != mj.version || j.CompletedBy != mj.completedBy || string(j.Result) != mj.result {
			t.Fatalf("job %s: store %s v%d by %q %s; model %s v%d by %q %s",
				mj.key, j.State, j.Version, j.CompletedBy, j.Result, mj.state, mj.version, mj.completedBy, mj.result)
		}
		if len(as) != len(mj.attempts) {
			t.Fatalf("job %s: store has %d attempts, model %d", mj.key, len(as), len(mj.attempts))
		}
		for i, a := range as {
			ma := mj.attempts[i]
			if a.ID != ma.id || a.State != ma.state || a.BaseVersion != ma.base || a.ProviderRef != ma.ref {
				t.Fatalf("attempt %d of %s: store %s %s base %d ref %q; model %s %s base %d ref %q",
					i+1, mj.key, a.ID, a.State, a.BaseVersion, a.ProviderRef, ma.id, ma.state, ma.base, ma.ref)
			}
		}
	}
	for _, v := range snap.Check() {
		t.Errorf("invariant: %s", v)
	}
	if s.prev != nil {
		for _, v := range invariant.CheckTransitions(s.prev, snap) {
			t.Errorf("transition: %s", v)
		}
	}
	s.prev = snap
}

var runs atomic.Int64

// TestModel drives both stores and the model with random sequences of every
// verb and compares them after each step. More runs: -rapid.checks=N;
// longer sequences: -rapid.steps=N.
func TestModel(t *testing.T) {
	t.Parallel()
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			store := d.open(t)
			trials := 0
			rapid.Check(t, func(rt *rapid.T) {
				trials++
				s := &machine{
					ctx:   context.Background(),
					store: store,
					m:     jobstest.NewManager(t, store, jobs.Options{}),
					owner: fmt.Sprintf("run-%d", runs.Add(1)),
					byKey: map[string]*modelJob{},
					jobOf: map[*modelAttempt]*modelJob{},
				}
				rt.Repeat(rapid.StateMachineActions(s))
			})
			t.Logf("%s: %d trials, each compared with the model after every step", d.name, trials)
		})
	}
}
