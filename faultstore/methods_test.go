package faultstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// TestMethodsListsEveryStoreMethod: Methods, which Config.Rates and Stats
// are keyed by, names each method of jobs.Store and of the capabilities
// faultstore wraps once, and nothing else.
func TestMethodsListsEveryStoreMethod(t *testing.T) {
	t.Parallel()
	var want []string
	for _, iface := range []reflect.Type{reflect.TypeFor[jobs.Store](), reflect.TypeFor[jobs.TxStore](),
		reflect.TypeFor[jobs.JobLister](), reflect.TypeFor[jobs.ClaimStore](), reflect.TypeFor[jobs.VerificationStore](),
		reflect.TypeFor[jobs.PurgeStore](), reflect.TypeFor[jobs.LookupStore](), reflect.TypeFor[jobs.JobCounter](),
		reflect.TypeFor[jobs.AttemptLister]()} {
		for i := range iface.NumMethod() {
			want = append(want, iface.Method(i).Name)
		}
	}
	slices.Sort(want)
	var got []string
	for _, m := range faultstore.Methods {
		got = append(got, string(m))
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("faultstore.Methods against the methods of testdb.Store (-store +Methods):\n%s", diff)
	}
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// world is what the calls of methodCases act on, built on the real store
// underneath: a pending job, a job with a running attempt, a job whose
// running attempt a reconciler has claimed until t0+1m, and a cancelled
// job.
type world struct {
	db                                   *sql.DB // the store's, for CreateJobTx
	pending, running, claimed, cancelled jobs.Job
	runningAttempt, claimedAttempt       jobs.Attempt
}

const claimToken = "clm_held"

func newWorld(t *testing.T, inner jobs.SQLStore) *world {
	t.Helper()
	ctx := t.Context()
	m := jobstest.NewManager(t, inner, jobs.Options{Clock: jobstest.NewClock(t0)})
	submit := func(key string) jobs.Job {
		t.Helper()
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	run := func(j jobs.Job) jobs.Attempt {
		t.Helper()
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err == nil {
			a, err = m.MarkRunning(ctx, a.ID, "ref-"+a.ID)
		}
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	w := &world{db: inner.DB(), pending: submit("pending"), running: submit("running"), claimed: submit("claimed"), cancelled: submit("cancelled")}
	w.runningAttempt = run(w.running)
	w.claimedAttempt = run(w.claimed)
	a := w.claimedAttempt
	if _, ok, err := inner.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
		Token: claimToken, At: t0, Until: t0.Add(time.Minute)}); !ok || err != nil {
		t.Fatalf("ClaimAttempt = %v, %v", ok, err)
	}
	var err error
	if w.cancelled, err = m.CancelJob(ctx, w.cancelled.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	return w
}

// staleIDs lists the open attempts not claimed beyond at.
func staleIDs(t *testing.T, s testdb.Store, at time.Time) []string {
	t.Helper()
	as, err := s.StaleAttempts(context.WithoutCancel(t.Context()), jobs.StaleQuery{UnknownBefore: t0.Add(time.Hour),
		OpenBefore: t0.Add(time.Hour), UnclaimedAt: at, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

// contents is everything a store holds that its methods can change: jobs,
// attempts, verifications, and which attempts are claimed when.
type contents struct {
	Snapshot      *invariant.Snapshot
	Verifications []jobs.Verification
	UnclaimedAtT0 []string
	UnclaimedLate []string // at t0+1m, when the world's claim ends
	Lookups       []jobs.ReconcileState
}

func read(t *testing.T, s testdb.Store) contents {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	snap, err := invariant.TakeSnapshot(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Verifications(ctx, jobs.VerificationFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	as, err := s.(jobs.AttemptLister).ListAttempts(ctx, jobs.AttemptQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	lookups, err := s.(jobs.LookupStore).ReconcileStates(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(lookups, func(a, b jobs.ReconcileState) int { return strings.Compare(a.AttemptID, b.AttemptID) })
	return contents{snap, vs, staleIDs(t, s, t0), staleIDs(t, s, t0.Add(time.Minute)), lookups}
}

// methodCase is one call of one method. written, for a write method,
// reports whether the call's write is in the store underneath.
type methodCase struct {
	method  faultstore.Method
	call    func(ctx context.Context, s testdb.Store, w *world) error
	written func(t *testing.T, inner testdb.Store, w *world) bool
}

var freshJob = jobs.Job{ID: "job_01NEW", Owner: "o", Key: "new", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`),
	Fingerprint: "f", State: jobs.JobPending, Version: 1, CreatedAt: t0, UpdatedAt: t0}

func jobExists(t *testing.T, s testdb.Store, owner, key string) bool {
	t.Helper()
	_, err := s.JobByKey(context.WithoutCancel(t.Context()), owner, key)
	if err != nil && !errors.Is(err, jobs.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func mustJob(t *testing.T, s testdb.Store, id string) jobs.Job {
	t.Helper()
	j, err := s.Job(context.WithoutCancel(t.Context()), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func methodCases() []methodCase {
	return []methodCase{
		{faultstore.CreateJob, func(ctx context.Context, s testdb.Store, w *world) error {
			_, _, err := s.CreateJob(ctx, freshJob)
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool { return jobExists(t, inner, "o", "new") }},
		{faultstore.CreateJobTx, func(ctx context.Context, s testdb.Store, w *world) error {
			tx, err := w.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			_, _, err = s.(jobs.TxStore).CreateJobTx(ctx, tx, freshJob)
			// Commit whatever the call did: an After fault's write is in tx.
			if cerr := tx.Commit(); cerr != nil {
				return errors.Join(err, cerr)
			}
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool { return jobExists(t, inner, "o", "new") }},
		{faultstore.ReplaceJob, func(ctx context.Context, s testdb.Store, w *world) error {
			j := freshJob
			j.Key = "cancelled"
			_, _, err := s.ReplaceJob(ctx, jobs.JobReplacement{OldID: w.cancelled.ID, From: []jobs.JobState{jobs.JobCancelled}, New: j})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return mustJob(t, inner, w.cancelled.ID).ReplacedBy == freshJob.ID
		}},
		{faultstore.Job, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.Job(ctx, w.running.ID)
			return err
		}, nil},
		{faultstore.JobByKey, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.JobByKey(ctx, "o", "running")
			return err
		}, nil},
		{faultstore.ListJobs, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.ListJobs(ctx, jobs.JobQuery{Limit: 10})
			return err
		}, nil},
		{faultstore.CloseJob, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.CloseJob(ctx, jobs.JobClose{ID: w.pending.ID, To: jobs.JobCancelled, Reason: "stop", At: t0})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return mustJob(t, inner, w.pending.ID).State == jobs.JobCancelled
		}},
		{faultstore.Attempt, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.Attempt(ctx, w.runningAttempt.ID)
			return err
		}, nil},
		{faultstore.Attempts, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.Attempts(ctx, w.running.ID)
			return err
		}, nil},
		{faultstore.CreateAttempt, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_01NEW", JobID: w.pending.ID, At: t0})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return mustJob(t, inner, w.pending.ID).Attempts == 1
		}},
		{faultstore.UpdateAttempt, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: w.runningAttempt.ID, From: []jobs.AttemptState{jobs.AttemptRunning},
				To: jobs.AttemptFailed, Reason: "declined", At: t0})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			a, err := inner.Attempt(context.WithoutCancel(t.Context()), w.runningAttempt.ID)
			if err != nil {
				t.Fatal(err)
			}
			return a.State == jobs.AttemptFailed
		}},
		{faultstore.CompleteAttempt, func(ctx context.Context, s testdb.Store, w *world) error {
			_, _, err := s.CompleteAttempt(ctx, jobs.Completion{AttemptID: w.runningAttempt.ID, Result: json.RawMessage(`{"ok":true}`), At: t0})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return mustJob(t, inner, w.running.ID).State == jobs.JobSucceeded
		}},
		{faultstore.StaleAttempts, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.StaleAttempts(ctx, jobs.StaleQuery{UnknownBefore: t0.Add(time.Hour), OpenBefore: t0.Add(time.Hour), Limit: 10})
			return err
		}, nil},
		{faultstore.ClaimAttempt, func(ctx context.Context, s testdb.Store, w *world) error {
			a := w.runningAttempt
			_, _, err := s.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
				Token: "clm_new", At: t0, Until: t0.Add(time.Minute)})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return !slices.Contains(staleIDs(t, inner, t0), w.runningAttempt.ID)
		}},
		{faultstore.RenewClaim, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.RenewClaim(ctx, jobs.AttemptClaim{ID: w.claimedAttempt.ID, Token: claimToken, Until: t0.Add(2 * time.Minute)})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			return !slices.Contains(staleIDs(t, inner, t0.Add(time.Minute)), w.claimedAttempt.ID)
		}},
		{faultstore.RecordVerification, func(ctx context.Context, s testdb.Store, w *world) error {
			return s.RecordVerification(ctx, jobs.Verification{ID: "ver_01NEW", Provider: "p2", Kind: "k", ContractVersion: "v1",
				Passed: true, VerifiedAt: t0})
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			vs, err := inner.Verifications(context.WithoutCancel(t.Context()), jobs.VerificationFilter{Provider: "p2"})
			if err != nil {
				t.Fatal(err)
			}
			return len(vs) == 1
		}},
		{faultstore.Verifications, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.Verifications(ctx, jobs.VerificationFilter{Kind: "k"})
			return err
		}, nil},
		{faultstore.PurgeJobs, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.PurgeJobs(ctx, jobs.PurgeQuery{Before: t0.Add(time.Hour), Limit: 10})
			return err
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			_, err := inner.Job(context.WithoutCancel(t.Context()), w.cancelled.ID)
			if err != nil && !errors.Is(err, jobs.ErrNotFound) {
				t.Fatal(err)
			}
			return errors.Is(err, jobs.ErrNotFound)
		}},
		{faultstore.RecordLookup, func(ctx context.Context, s testdb.Store, w *world) error {
			return s.(jobs.LookupStore).RecordLookup(ctx, jobs.AttemptLookup{AttemptID: w.runningAttempt.ID, At: t0, Answer: "pending"})
		}, func(t *testing.T, inner testdb.Store, w *world) bool {
			rs, err := inner.(jobs.LookupStore).ReconcileStates(context.WithoutCancel(t.Context()), []string{w.runningAttempt.ID})
			if err != nil {
				t.Fatal(err)
			}
			return len(rs) == 1 && rs[0].LookupAnswer == "pending"
		}},
		{faultstore.ReconcileStates, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.(jobs.LookupStore).ReconcileStates(ctx, []string{w.claimedAttempt.ID})
			return err
		}, nil},
		{faultstore.CountJobs, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.(jobs.JobCounter).CountJobs(ctx, jobs.JobQuery{})
			return err
		}, nil},
		{faultstore.ListAttempts, func(ctx context.Context, s testdb.Store, w *world) error {
			_, err := s.(jobs.AttemptLister).ListAttempts(ctx, jobs.AttemptQuery{Limit: 10})
			return err
		}, nil},
	}
}

// TestFaultInEveryMethod fails each method of the store, on both dialects:
// a Before fault returns a storage error and writes nothing; an After fault
// on a write method returns a storage error once the write is in the store;
// and reads, which cannot apply and then fail, only ever fail Before.
func TestFaultInEveryMethod(t *testing.T) {
	t.Parallel()
	cases := methodCases()
	var covered []faultstore.Method
	for _, c := range cases {
		covered = append(covered, c.method)
	}
	if !slices.Equal(covered, faultstore.Methods) {
		t.Fatalf("the cases cover %v, want every one of faultstore.Methods %v, in its order", covered, faultstore.Methods)
	}
	stores := []struct {
		name string
		open func(t testing.TB) jobs.SQLStore
	}{
		{"sqlite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
		{"postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				for _, afterShare := range []float64{0, 1} {
					kind := faultstore.Before
					if afterShare == 1 && c.written != nil {
						kind = faultstore.After
					}
					t.Run(fmt.Sprintf("%s/AfterShare=%v", c.method, afterShare), func(t *testing.T) {
						t.Parallel()
						inner := st.open(t)
						w := newWorld(t, inner)
						before := read(t, inner)
						fs := faultstore.New(inner, faultstore.Config{Seed: 1, AfterShare: afterShare,
							Rates: map[faultstore.Method]float64{c.method: 1}})

						err := c.call(t.Context(), fs, w)
						var se *jobs.StorageError
						if !errors.As(err, &se) || se.Kind != jobs.StorageUnavailable || se.Op != string(c.method) || !errors.Is(err, jobs.ErrStorage) {
							t.Fatalf("%s = %v, want an unavailable *StorageError for %s", c.method, err, c.method)
						}
						stats := fs.Stats()
						if stats.Calls[c.method] != 1 || stats.Total() != 1 || stats.Faults[c.method][kind] != 1 {
							t.Errorf("stats = %+v, want one call of %s and one %s fault", stats, c.method, kind)
						}

						if kind == faultstore.After {
							if !c.written(t, inner, w) {
								t.Errorf("an After fault on %s: the write is not in the store", c.method)
							}
							return
						}
						if c.written != nil && c.written(t, inner, w) {
							t.Errorf("a Before fault on %s: the write is in the store", c.method)
						}
						if diff := cmp.Diff(before, read(t, inner)); diff != "" {
							t.Errorf("a Before fault on %s changed the store (-before +after):\n%s", c.method, diff)
						}
					})
				}
			}
		})
	}
}
