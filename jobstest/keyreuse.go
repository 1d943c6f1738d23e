package jobstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// reuseReq returns req("owner-1", key) under the key reuse policy r.
func reuseReq(key string, r jobs.KeyReuse) jobs.SubmitRequest {
	q := req("owner-1", key)
	q.Reuse = r
	return q
}

// testKeyReuse: under a KeyReuse policy, the same intent submitted again
// after its job failed (or was cancelled, as the policy says) creates a new
// job under the key, and only then. The old job stays as it was, readable
// by ID with its original key and naming its replacement; GetByKey returns
// the new job. Everything else is as without a policy.
func testKeyReuse(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	t.Run("Policies", func(t *testing.T) {
		t.Parallel()
		ev := &events{}
		e := setup(t, newStore, func(o *jobs.Options) { o.Observer = ev })
		for _, tc := range []struct {
			name    string
			state   jobs.JobState
			reuse   jobs.KeyReuse
			replace bool
		}{
			{"failed, after failure", jobs.JobFailed, jobs.KeyReuseAfterFailure, true},
			{"failed, after failure or cancel", jobs.JobFailed, jobs.KeyReuseAfterFailureOrCancel, true},
			{"cancelled, after failure or cancel", jobs.JobCancelled, jobs.KeyReuseAfterFailureOrCancel, true},
			{"cancelled, after failure", jobs.JobCancelled, jobs.KeyReuseAfterFailure, false},
			{"failed, never", jobs.JobFailed, jobs.KeyReuseNever, false},
			{"cancelled, never", jobs.JobCancelled, jobs.KeyReuseNever, false},
			{"succeeded", jobs.JobSucceeded, jobs.KeyReuseAfterFailureOrCancel, false},
			{"pending", jobs.JobPending, jobs.KeyReuseAfterFailureOrCancel, false},
			{"running", jobs.JobRunning, jobs.KeyReuseAfterFailureOrCancel, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				e := e.with(t)
				key := "reuse-" + randomHex(4)
				old := e.jobIn(key, tc.state)
				before := e.countJobs()
				got, created, err := e.m.Submit(e.ctx, reuseReq(key, tc.reuse))
				if err != nil {
					t.Fatalf("Submit = %v", err)
				}
				if !tc.replace {
					if created || got.ID != old.ID {
						t.Fatalf("Submit = %s, created=%v; want the %s job %s, created=false", got.ID, created, tc.state, old.ID)
					}
					if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
						t.Errorf("the %s job changed (-before +after):\n%s", tc.state, diff)
					}
					if n := e.countJobs(); n != before {
						t.Errorf("%d jobs after Submit, want %d", n, before)
					}
					return
				}
				if !created || got.ID == old.ID || got.State != jobs.JobPending || got.Key != key || got.ReplacedBy != "" || got.Attempts != 0 {
					t.Fatalf("Submit = %+v, created=%v; want a new pending job under the key", got, created)
				}
				// The old job: as it was, its key retired for the new one.
				want := old
				want.ReplacedBy = got.ID
				if diff := cmp.Diff(want, e.job(old.ID)); diff != "" {
					t.Errorf("the retired job (-want +got):\n%s", diff)
				}
				if byKey, err := e.m.GetByKey(e.ctx, "owner-1", key); err != nil || byKey.ID != got.ID {
					t.Errorf("GetByKey = %s, %v; want the new job %s", byKey.ID, err, got.ID)
				}
				if r, err := e.m.Replaced(e.ctx, got.ID); err != nil || r.ID != old.ID || r.Key != key {
					t.Errorf("Replaced(new) = %s (key %q), %v; want %s", r.ID, r.Key, err, old.ID)
				}
				if n := e.countJobs(); n != before+1 {
					t.Errorf("%d jobs after the reuse, want %d", n, before+1)
				}
				// The same request again is a replay of the new job.
				again, created, err := e.m.Submit(e.ctx, reuseReq(key, tc.reuse))
				if err != nil || created || again.ID != got.ID {
					t.Errorf("the same Submit again = %s, created=%v, %v; want the new job %s", again.ID, created, err, got.ID)
				}
				if !ev.has(jobs.Event{Type: jobs.EventJobCreated, JobID: got.ID, Replaces: old.ID}) {
					t.Errorf("no %s event names job %s as replaced by %s", jobs.EventJobCreated, old.ID, got.ID)
				}
			})
		}
		e.checkInvariants()
	})

	t.Run("NeverWhileAnAttemptMayAct", func(t *testing.T) {
		t.Parallel()
		// A cancelled job whose attempt is starting, running or unknown
		// keeps its key: the provider may still act on that attempt. Once
		// the attempt is known not to have acted (failed, or cancelled),
		// the same Submit takes the key.
		ev := &events{}
		e := setup(t, newStore, func(o *jobs.Options) { o.Observer = ev })
		for _, tc := range []struct {
			state   jobs.AttemptState
			resolve func(e *env, id string) error
		}{
			{jobs.AttemptStarting, func(e *env, id string) error { _, err := e.m.Cancel(e.ctx, id, "never sent"); return err }},
			{jobs.AttemptRunning, func(e *env, id string) error { _, err := e.m.Fail(e.ctx, id, "declined"); return err }},
			{jobs.AttemptUnknown, func(e *env, id string) error {
				_, err := e.m.Cancel(e.ctx, id, "the provider says it never received it")
				return err
			}},
		} {
			t.Run(string(tc.state), func(t *testing.T) {
				e := e.with(t)
				key := "in-doubt-" + randomHex(4)
				old, a := e.cancelledWith(key, tc.state)
				before := e.countJobs()
				for range 2 {
					got, created, err := e.m.Submit(e.ctx, reuseReq(key, jobs.KeyReuseAfterFailureOrCancel))
					var inFlight *jobs.AttemptInFlightError
					if !errors.Is(err, jobs.ErrAttemptInFlight) || !errors.As(err, &inFlight) ||
						inFlight.JobID != old.ID || inFlight.AttemptID != a.ID || inFlight.State != tc.state {
						t.Fatalf("Submit with reuse while attempt %s is %s = %s, created=%v, %v; want an *AttemptInFlightError naming job %s and attempt %s (%s)",
							a.ID, tc.state, got.ID, created, err, old.ID, a.ID, tc.state)
					}
					if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
						t.Errorf("the refused reuse changed the old job (-before +after):\n%s", diff)
					}
					if n := e.countJobs(); n != before {
						t.Errorf("%d jobs after a refused reuse, want %d", n, before)
					}
					if byKey, err := e.m.GetByKey(e.ctx, "owner-1", key); err != nil || byKey.ID != old.ID {
						t.Errorf("GetByKey = %s, %v; want the old job %s", byKey.ID, err, old.ID)
					}
				}
				// Known not to have acted: the key is free.
				if err := tc.resolve(e, a.ID); err != nil {
					t.Fatal(err)
				}
				got, created, err := e.m.Submit(e.ctx, reuseReq(key, jobs.KeyReuseAfterFailureOrCancel))
				if err != nil || !created || got.ID == old.ID {
					t.Fatalf("Submit once the attempt was resolved = %s, created=%v, %v; want a new job", got.ID, created, err)
				}
				if r := e.job(old.ID); r.ReplacedBy != got.ID {
					t.Errorf("the old job is replaced by %q, want %s", r.ReplacedBy, got.ID)
				}
			})
		}
		e.checkInvariants()
	})

	t.Run("NeverAfterTheProviderActed", func(t *testing.T) {
		t.Parallel()
		// The attempt of a cancelled job delivers its result late: the
		// provider did act. The result is dropped, the attempt records it,
		// it is reported, and the job keeps its key for good.
		ev := &events{}
		e := setup(t, newStore, func(o *jobs.Options) { o.Observer = ev })
		old, a := e.cancelledWith("acted", jobs.AttemptUnknown)
		_, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`{"charged":1200}`))
		var closed *jobs.JobClosedError
		if !errors.As(err, &closed) || closed.State != jobs.JobCancelled {
			t.Fatalf("late Complete = %v; want a *JobClosedError (cancelled)", err)
		}
		late := e.attempt(a.ID)
		if late.State != jobs.AttemptCancelled || late.Reason != jobs.ReasonDroppedJobCancelled || !late.ResultDropped() {
			t.Errorf("the late attempt is %s (%q), ResultDropped %v; want cancelled with %q, ResultDropped",
				late.State, late.Reason, late.ResultDropped(), jobs.ReasonDroppedJobCancelled)
		}
		if n := ev.count(jobs.EventResultDropped, a.ID); n != 1 {
			t.Errorf("%d %s events for the late result, want 1", n, jobs.EventResultDropped)
		}
		old = e.job(old.ID)
		for range 2 {
			got, created, err := e.m.Submit(e.ctx, reuseReq("acted", jobs.KeyReuseAfterFailureOrCancel))
			if err != nil || created || got.ID != old.ID {
				t.Fatalf("Submit with reuse after the provider acted = %s, created=%v, %v; want the cancelled job %s, not created",
					got.ID, created, err, old.ID)
			}
		}
		if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
			t.Errorf("the old job changed (-before +after):\n%s", diff)
		}
		if n := e.countJobs(); n != 1 {
			t.Errorf("%d jobs, want 1", n)
		}
		// The store refuses it too, asked directly.
		fresh := old
		fresh.ID, fresh.State, fresh.Version, fresh.Attempts, fresh.Reason, fresh.ClosedAt = "job_DIRECT", jobs.JobPending, 1, 0, "", time.Time{}
		got, created, err := e.store.ReplaceJob(e.ctx, jobs.JobReplacement{OldID: old.ID, From: []jobs.JobState{jobs.JobCancelled}, New: fresh})
		if err != nil || created || got.ID != old.ID {
			t.Errorf("ReplaceJob after the provider acted = %s, created=%v, %v; want the old job, not created", got.ID, created, err)
		}
		e.checkInvariants()
	})

	t.Run("RacesTheOldAttempt", func(t *testing.T) {
		t.Parallel()
		// Many Submits with reuse race the old attempt's outcome, on many
		// jobs at once: a new job appears only if that outcome is that the
		// provider did not act, and then exactly one; every Submit is
		// either refused naming the attempt, or returns the job that holds
		// the key.
		e := setup(t, newStore)
		const jobsN, submitters = 12, 8
		type row struct {
			old     jobs.Job
			attempt jobs.Attempt
			acted   bool // the attempt delivers a result (else it fails)
		}
		rows := make([]row, jobsN)
		for i := range rows {
			j, a := e.cancelledWith(fmt.Sprintf("race-%d-%s", i, randomHex(3)), jobs.AttemptUnknown)
			rows[i] = row{old: j, attempt: a, acted: i%2 == 0}
		}
		type answer struct {
			id      string
			created bool
			err     error
		}
		answers := make([][]answer, jobsN)
		for i := range answers {
			answers[i] = make([]answer, submitters)
		}
		release(jobsN*(submitters+1), func(k int) {
			r := rows[k%jobsN]
			if k < jobsN {
				var err error
				if r.acted {
					_, err = e.m.Complete(e.ctx, r.attempt.ID, json.RawMessage(`{"done":true}`))
					if errors.Is(err, jobs.ErrJobClosed) {
						err = nil
					}
				} else {
					_, err = e.m.Fail(e.ctx, r.attempt.ID, "declined")
				}
				if err != nil {
					t.Errorf("resolving attempt %s: %v", r.attempt.ID, err)
				}
				return
			}
			j, created, err := e.m.Submit(e.ctx, reuseReq(r.old.Key, jobs.KeyReuseAfterFailureOrCancel))
			answers[k%jobsN][k/jobsN-1] = answer{j.ID, created, err}
		})
		for i, r := range rows {
			holder, err := e.m.GetByKey(e.ctx, "owner-1", r.old.Key)
			if err != nil {
				t.Fatal(err)
			}
			if r.acted && holder.ID != r.old.ID {
				t.Errorf("job %d: the provider acted, yet the key moved to a new job %s", i, holder.ID)
			}
			nCreated := 0
			for _, a := range answers[i] {
				var inFlight *jobs.AttemptInFlightError
				switch {
				case errors.As(a.err, &inFlight):
					if inFlight.AttemptID != r.attempt.ID || inFlight.JobID != r.old.ID {
						t.Errorf("job %d: refused naming %s/%s, want %s/%s", i, inFlight.JobID, inFlight.AttemptID, r.old.ID, r.attempt.ID)
					}
				case a.err != nil:
					t.Errorf("job %d: Submit = %v", i, a.err)
				case a.id != r.old.ID && a.id != holder.ID:
					t.Errorf("job %d: Submit returned %s, neither the old job %s nor the key's holder %s", i, a.id, r.old.ID, holder.ID)
				case a.created:
					nCreated++
				}
			}
			if (holder.ID != r.old.ID) != (nCreated == 1) || nCreated > 1 {
				t.Errorf("job %d: %d Submits created a job, the key's holder is %s (old %s)", i, nCreated, holder.ID, r.old.ID)
			}
		}
		if n, want := e.countJobs(), jobsN; n < want || n > want+jobsN/2 {
			t.Errorf("%d jobs, want between %d and %d", n, want, want+jobsN/2)
		}
		e.checkInvariants()
	})

	t.Run("OtherIntentConflicts", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		old := e.jobIn("k", jobs.JobFailed)
		r := reuseReq("k", jobs.KeyReuseAfterFailureOrCancel)
		r.Params = json.RawMessage(`{"amount":1300,"currency":"eur"}`)
		_, _, err := e.m.Submit(e.ctx, r)
		var kc *jobs.KeyConflictError
		if !errors.Is(err, jobs.ErrKeyConflict) || !errors.As(err, &kc) || kc.JobID != old.ID {
			t.Fatalf("Submit of another intent = %v; want a key conflict naming %s", err, old.ID)
		}
		if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
			t.Errorf("the failed job changed (-before +after):\n%s", diff)
		}
		if n := e.countJobs(); n != 1 {
			t.Errorf("%d jobs, want 1", n)
		}
	})

	t.Run("Chain", func(t *testing.T) {
		t.Parallel()
		// Each failure frees the key once more; each call retires one job.
		e := setup(t, newStore)
		first := e.jobIn("k", jobs.JobFailed)
		second, _, err := e.m.Submit(e.ctx, reuseReq("k", jobs.KeyReuseAfterFailure))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.m.FailJob(e.ctx, second.ID, "gave up again"); err != nil {
			t.Fatal(err)
		}
		third, created, err := e.m.Submit(e.ctx, reuseReq("k", jobs.KeyReuseAfterFailure))
		if err != nil || !created || third.ID == second.ID || third.ID == first.ID {
			t.Fatalf("second reuse = %s, created=%v, %v; want a third job", third.ID, created, err)
		}
		for _, link := range []struct{ old, by jobs.Job }{{first, second}, {second, third}} {
			if got := e.job(link.old.ID); got.ReplacedBy != link.by.ID || got.Key != "k" || got.State != jobs.JobFailed {
				t.Errorf("job %s: ReplacedBy %q, key %q, %s; want replaced by %s, key k, failed", got.ID, got.ReplacedBy, got.Key, got.State, link.by.ID)
			}
			if r, err := e.m.Replaced(e.ctx, link.by.ID); err != nil || r.ID != link.old.ID {
				t.Errorf("Replaced(%s) = %s, %v; want %s", link.by.ID, r.ID, err, link.old.ID)
			}
		}
		if _, err := e.m.Replaced(e.ctx, first.ID); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Replaced(first) = %v; want ErrNotFound", err)
		}
		if n := e.countJobs(); n != 3 {
			t.Errorf("%d jobs, want 3", n)
		}
		e.checkInvariants()
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		// Not recorded: its history, 32 Submits racing one ReplaceJob that
		// a slow store answers late, has the shape for which the
		// linearizability checker's search is exponential (a write called
		// first and placed after a read called later, with every other call
		// placeable only after the write); it is not decided in minutes.
		e := setupUnrecorded(t, newStore)
		old := e.jobIn("k", jobs.JobFailed)
		const n = 32
		ids := make([]string, n)
		created := make([]bool, n)
		errs := make([]error, n)
		release(n, func(i int) {
			var j jobs.Job
			j, created[i], errs[i] = e.m.Submit(e.ctx, reuseReq("k", jobs.KeyReuseAfterFailure))
			ids[i] = j.ID
		})
		nCreated := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Submit %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] || ids[i] == old.ID {
				t.Fatalf("Submit %d returned job %s, Submit 0 %s (the failed job is %s)", i, ids[i], ids[0], old.ID)
			}
			if created[i] {
				nCreated++
			}
		}
		if nCreated != 1 {
			t.Errorf("%d of %d concurrent reuses reported created, want 1", nCreated, n)
		}
		if got := e.countJobs(); got != 2 {
			t.Errorf("%d jobs after %d concurrent reuses, want 2", got, n)
		}
		if got := e.job(old.ID); got.ReplacedBy != ids[0] {
			t.Errorf("the failed job is replaced by %q, want %s", got.ReplacedBy, ids[0])
		}
		e.checkInvariants()
	})

	t.Run("RefusedInput", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newStore)
		old := e.jobIn("failed", jobs.JobFailed)
		// SubmitTx refuses a policy before it looks at the store or the
		// transaction, so it needs neither here; testSubmitTx refuses it
		// again inside a real transaction of a TxStore.
		for _, tc := range []struct {
			name   string
			submit func() error
		}{
			{"unknown policy, new key", func() error {
				_, _, err := e.m.Submit(e.ctx, reuseReq("new", jobs.KeyReuse(9)))
				return err
			}},
			{"unknown policy, failed job", func() error {
				_, _, err := e.m.Submit(e.ctx, reuseReq("failed", jobs.KeyReuse(3)))
				return err
			}},
			{"SubmitTx, new key", func() error {
				_, _, err := e.m.SubmitTx(e.ctx, nil, reuseReq("new", jobs.KeyReuseAfterFailure))
				return err
			}},
			{"SubmitTx, failed job", func() error {
				_, _, err := e.m.SubmitTx(e.ctx, nil, reuseReq("failed", jobs.KeyReuseAfterFailureOrCancel))
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var ie *jobs.InputError
				if err := tc.submit(); !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "Reuse" {
					t.Fatalf("got %v; want an *InputError for Reuse", err)
				}
			})
		}
		if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
			t.Errorf("the failed job changed (-before +after):\n%s", diff)
		}
		if n := e.countJobs(); n != 1 {
			t.Errorf("%d jobs after refused submits, want 1", n)
		}
	})

	t.Run("StoreContract", func(t *testing.T) {
		t.Parallel()
		// It asks for a new job under an ID another job holds: outside the
		// checker's assumption that IDs are unique.
		e := setupUnrecorded(t, newStore)
		old := e.jobIn("k", jobs.JobFailed)
		running := e.jobIn("busy", jobs.JobRunning)
		fresh := func(id, key string) jobs.Job {
			return jobs.Job{ID: id, Owner: "owner-1", Key: key, Kind: old.Kind, Provider: old.Provider, Params: old.Params,
				Fingerprint: old.Fingerprint, State: jobs.JobPending, Version: 1, CreatedAt: old.CreatedAt, UpdatedAt: old.CreatedAt}
		}
		failed := []jobs.JobState{jobs.JobFailed}
		for _, tc := range []struct {
			name string
			r    jobs.JobReplacement
		}{
			{"no old job", jobs.JobReplacement{From: failed, New: fresh("job_NEW1", "k")}},
			{"no new ID", jobs.JobReplacement{OldID: old.ID, From: failed, New: fresh("", "k")}},
			{"new ID is the old one", jobs.JobReplacement{OldID: old.ID, From: failed, New: fresh(old.ID, "k")}},
			{"no states", jobs.JobReplacement{OldID: old.ID, New: fresh("job_NEW1", "k")}},
			{"an open state", jobs.JobReplacement{OldID: old.ID, From: []jobs.JobState{jobs.JobFailed, jobs.JobRunning}, New: fresh("job_NEW1", "k")}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, _, err := e.store.ReplaceJob(e.ctx, tc.r); !errors.Is(err, jobs.ErrInvalidInput) {
					t.Errorf("ReplaceJob = %v; want ErrInvalidInput", err)
				}
			})
		}
		// A new job that cannot be stored (its ID is taken) retires
		// nothing: both or neither.
		if _, _, err := e.store.ReplaceJob(e.ctx, jobs.JobReplacement{OldID: old.ID, From: failed, New: fresh(running.ID, "k")}); err == nil {
			t.Error("ReplaceJob with a taken ID succeeded")
		}
		if diff := cmp.Diff(old, e.job(old.ID)); diff != "" {
			t.Errorf("a refused ReplaceJob changed the old job (-before +after):\n%s", diff)
		}
		// A job not in From keeps its key: CreateJob's answer.
		got, created, err := e.store.ReplaceJob(e.ctx, jobs.JobReplacement{OldID: running.ID, From: failed, New: fresh("job_NEW2", "busy")})
		if err != nil || created || got.ID != running.ID || got.ReplacedBy != "" {
			t.Errorf("ReplaceJob of a running job = %s, created=%v, %v; want it unchanged", got.ID, created, err)
		}
		if n := e.countJobs(); n != 2 {
			t.Errorf("%d jobs, want 2", n)
		}
		// The retired key is found by JobByKey, the key by the new job.
		got, created, err = e.store.ReplaceJob(e.ctx, jobs.JobReplacement{OldID: old.ID, From: failed, New: fresh("job_NEW3", "k")})
		if err != nil || !created || got.ID != "job_NEW3" {
			t.Fatalf("ReplaceJob = %s, created=%v, %v; want job_NEW3 created", got.ID, created, err)
		}
		if r, err := e.store.JobByKey(e.ctx, "owner-1", jobs.RetiredKey("k", "job_NEW3")); err != nil || r.ID != old.ID || r.Key != "k" || r.ReplacedBy != "job_NEW3" {
			t.Errorf("JobByKey(retired key) = %+v, %v; want job %s, key k, replaced by job_NEW3", r, err, old.ID)
		}
		// Again, for the same old job: it holds the key no more.
		got, created, err = e.store.ReplaceJob(e.ctx, jobs.JobReplacement{OldID: old.ID, From: failed, New: fresh("job_NEW4", "k")})
		if err != nil || created || got.ID != "job_NEW3" {
			t.Errorf("ReplaceJob again = %s, created=%v, %v; want job_NEW3, not created", got.ID, created, err)
		}
	})

}
