package history

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/intentjobs/jobs"
)

//go:generate go run ./internal/capgen/gencaps -o capabilities.go

// Record returns a store that passes every call to inner, unchanged, and
// records it in sink as a call of the actor client (a name the test
// chooses: "worker-3", "reconciler"): the method, its arguments, the
// answer and its outcome, and the times before the call and after the
// answer.
//
// The store returned has exactly the capabilities of inner among
// jobs.TxStore, JobLister, ClaimStore, VerificationStore, PurgeStore,
// CloseNotifier, LookupStore, JobCounter and AttemptLister: a type assertion for one of them succeeds on it if and
// only if it succeeds on inner, so that a Manager over it does what it
// would do over inner. It does not have jobs.PgxTxStore (see the package
// documentation).
func Record(inner jobs.Store, sink *Sink, client string) jobs.Store {
	return combine(&recorder{inner: inner, sink: sink, client: client}, capabilitiesOf(inner))
}

// capability is one of the interfaces a store may have beside jobs.Store.
type capability uint16

// The capabilities, one bit each; the generated combinations are named by
// the sets of them.
const (
	capTx capability = 1 << iota
	capLister
	capClaims
	capVerifications
	capPurge
	capNotifier
	capLookups
	capCounter
	capAttemptLister

	allCapabilities = capTx | capLister | capClaims | capVerifications | capPurge | capNotifier |
		capLookups | capCounter | capAttemptLister
)

// capabilitiesOf returns the set of capabilities s has.
func capabilitiesOf(s jobs.Store) capability {
	var c capability
	if _, ok := s.(jobs.TxStore); ok {
		c |= capTx
	}
	if _, ok := s.(jobs.JobLister); ok {
		c |= capLister
	}
	if _, ok := s.(jobs.ClaimStore); ok {
		c |= capClaims
	}
	if _, ok := s.(jobs.VerificationStore); ok {
		c |= capVerifications
	}
	if _, ok := s.(jobs.PurgeStore); ok {
		c |= capPurge
	}
	if _, ok := s.(jobs.CloseNotifier); ok {
		c |= capNotifier
	}
	if _, ok := s.(jobs.LookupStore); ok {
		c |= capLookups
	}
	if _, ok := s.(jobs.JobCounter); ok {
		c |= capCounter
	}
	if _, ok := s.(jobs.AttemptLister); ok {
		c |= capAttemptLister
	}
	return c
}

// recorder implements every method of jobs.Store and its capabilities;
// the generated combinations (capabilities.go) expose exactly those of
// its inner store.
type recorder struct {
	inner  jobs.Store
	sink   *Sink
	client string
}

// record runs fn, recording the call of m with args before it and its
// answer after it; results extracts what fn returned beside the error.
func record[T any](r *recorder, m Method, args Args, fn func() (T, error), results func(T) Results) (T, error) {
	op := r.sink.call(r.client, m, time.Now().UnixNano(), &args)
	v, err := fn()
	at := time.Now().UnixNano()
	res := results(v)
	r.sink.ret(op, at, &res, err)
	return v, err
}

// nonZero returns &v, or nil for a zero v.
func nonZero[T any](v T) *T {
	if reflect.ValueOf(&v).Elem().IsZero() {
		return nil
	}
	return &v
}

// capabilityOf returns the inner store as C, or an error matching
// errors.ErrUnsupported; the generated combinations never let a method of
// a capability the inner store lacks be called.
func capabilityOf[C any](r *recorder, m Method) (C, error) {
	c, ok := r.inner.(C)
	if !ok {
		return c, fmt.Errorf("history: %s: the recorded %T does not have it: %w", m, r.inner, errors.ErrUnsupported)
	}
	return c, nil
}

type jobCreated struct {
	j       jobs.Job
	created bool
}

func (v jobCreated) results() Results { return Results{Job: nonZero(v.j), Created: v.created} }

type jobAttempt struct {
	j jobs.Job
	a jobs.Attempt
}

func jobResults(j jobs.Job) Results         { return Results{Job: nonZero(j)} }
func attemptResults(a jobs.Attempt) Results { return Results{Attempt: nonZero(a)} }
func noResults(struct{}) Results            { return Results{} }

func (r *recorder) CreateJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	v, err := record(r, CreateJob, Args{Job: &j}, func() (jobCreated, error) {
		j, created, err := r.inner.CreateJob(ctx, j)
		return jobCreated{j, created}, err
	}, jobCreated.results)
	return v.j, v.created, err
}

func (r *recorder) ReplaceJob(ctx context.Context, rep jobs.JobReplacement) (jobs.Job, bool, error) {
	v, err := record(r, ReplaceJob, Args{Replacement: &rep}, func() (jobCreated, error) {
		j, created, err := r.inner.ReplaceJob(ctx, rep)
		return jobCreated{j, created}, err
	}, jobCreated.results)
	return v.j, v.created, err
}

func (r *recorder) Job(ctx context.Context, id string) (jobs.Job, error) {
	return record(r, Job, Args{ID: id}, func() (jobs.Job, error) { return r.inner.Job(ctx, id) }, jobResults)
}

func (r *recorder) JobByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	return record(r, JobByKey, Args{Owner: owner, Key: key}, func() (jobs.Job, error) {
		return r.inner.JobByKey(ctx, owner, key)
	}, jobResults)
}

func (r *recorder) CloseJob(ctx context.Context, c jobs.JobClose) (jobs.Job, error) {
	return record(r, CloseJob, Args{Close: &c}, func() (jobs.Job, error) { return r.inner.CloseJob(ctx, c) }, jobResults)
}

func (r *recorder) Attempt(ctx context.Context, id string) (jobs.Attempt, error) {
	return record(r, Attempt, Args{ID: id}, func() (jobs.Attempt, error) { return r.inner.Attempt(ctx, id) }, attemptResults)
}

func (r *recorder) Attempts(ctx context.Context, jobID string) ([]jobs.Attempt, error) {
	return record(r, Attempts, Args{JobID: jobID}, func() ([]jobs.Attempt, error) {
		return r.inner.Attempts(ctx, jobID)
	}, func(as []jobs.Attempt) Results { return Results{Attempts: as} })
}

func (r *recorder) CreateAttempt(ctx context.Context, na jobs.NewAttempt) (jobs.Attempt, error) {
	return record(r, CreateAttempt, Args{NewAttempt: &na}, func() (jobs.Attempt, error) {
		return r.inner.CreateAttempt(ctx, na)
	}, attemptResults)
}

func (r *recorder) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	return record(r, UpdateAttempt, Args{Update: &u}, func() (jobs.Attempt, error) {
		return r.inner.UpdateAttempt(ctx, u)
	}, attemptResults)
}

func (r *recorder) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	v, err := record(r, CompleteAttempt, Args{Completion: &c}, func() (jobAttempt, error) {
		j, a, err := r.inner.CompleteAttempt(ctx, c)
		return jobAttempt{j, a}, err
	}, func(v jobAttempt) Results { return Results{Job: nonZero(v.j), Attempt: nonZero(v.a)} })
	return v.j, v.a, err
}

// CreateJobTx implements jobs.TxStore. The job exists only if tx commits,
// which the history cannot tell.
func (r *recorder) CreateJobTx(ctx context.Context, tx jobs.DBTX, j jobs.Job) (jobs.Job, bool, error) {
	v, err := record(r, CreateJobTx, Args{Job: &j}, func() (jobCreated, error) {
		s, err := capabilityOf[jobs.TxStore](r, CreateJobTx)
		if err != nil {
			return jobCreated{}, err
		}
		j, created, err := s.CreateJobTx(ctx, tx, j)
		return jobCreated{j, created}, err
	}, jobCreated.results)
	return v.j, v.created, err
}

func (r *recorder) ListJobs(ctx context.Context, q jobs.JobQuery) ([]jobs.Job, error) {
	return record(r, ListJobs, Args{JobQuery: &q}, func() ([]jobs.Job, error) {
		s, err := capabilityOf[jobs.JobLister](r, ListJobs)
		if err != nil {
			return nil, err
		}
		return s.ListJobs(ctx, q)
	}, func(js []jobs.Job) Results { return Results{Jobs: js} })
}

func (r *recorder) StaleAttempts(ctx context.Context, q jobs.StaleQuery) ([]jobs.Attempt, error) {
	return record(r, StaleAttempts, Args{StaleQuery: &q}, func() ([]jobs.Attempt, error) {
		s, err := capabilityOf[jobs.ClaimStore](r, StaleAttempts)
		if err != nil {
			return nil, err
		}
		return s.StaleAttempts(ctx, q)
	}, func(as []jobs.Attempt) Results { return Results{Attempts: as} })
}

type attemptClaimed struct {
	a  jobs.Attempt
	ok bool
}

func (r *recorder) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	v, err := record(r, ClaimAttempt, Args{Claim: &c}, func() (attemptClaimed, error) {
		s, err := capabilityOf[jobs.ClaimStore](r, ClaimAttempt)
		if err != nil {
			return attemptClaimed{}, err
		}
		a, ok, err := s.ClaimAttempt(ctx, c)
		return attemptClaimed{a, ok}, err
	}, func(v attemptClaimed) Results { return Results{Attempt: nonZero(v.a), Claimed: v.ok} })
	return v.a, v.ok, err
}

func (r *recorder) RenewClaim(ctx context.Context, c jobs.AttemptClaim) (bool, error) {
	return record(r, RenewClaim, Args{Claim: &c}, func() (bool, error) {
		s, err := capabilityOf[jobs.ClaimStore](r, RenewClaim)
		if err != nil {
			return false, err
		}
		return s.RenewClaim(ctx, c)
	}, func(ok bool) Results { return Results{Claimed: ok} })
}

func (r *recorder) RecordVerification(ctx context.Context, v jobs.Verification) error {
	_, err := record(r, RecordVerification, Args{Verification: &v}, func() (struct{}, error) {
		s, err := capabilityOf[jobs.VerificationStore](r, RecordVerification)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, s.RecordVerification(ctx, v)
	}, noResults)
	return err
}

func (r *recorder) Verifications(ctx context.Context, f jobs.VerificationFilter) ([]jobs.Verification, error) {
	return record(r, Verifications, Args{VerificationFilter: &f}, func() ([]jobs.Verification, error) {
		s, err := capabilityOf[jobs.VerificationStore](r, Verifications)
		if err != nil {
			return nil, err
		}
		return s.Verifications(ctx, f)
	}, func(vs []jobs.Verification) Results { return Results{Verifications: vs} })
}

func (r *recorder) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	return record(r, PurgeJobs, Args{PurgeQuery: &q}, func() (jobs.PurgeCount, error) {
		s, err := capabilityOf[jobs.PurgeStore](r, PurgeJobs)
		if err != nil {
			return jobs.PurgeCount{}, err
		}
		return s.PurgeJobs(ctx, q)
	}, func(n jobs.PurgeCount) Results { return Results{Purged: nonZero(n)} })
}

// NotifyClosed implements jobs.CloseNotifier. The registration is
// recorded; the channel's wake-ups are not.
func (r *recorder) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	type registration struct {
		wake <-chan struct{}
		stop func()
	}
	v, err := record(r, NotifyClosed, Args{JobID: jobID}, func() (registration, error) {
		s, err := capabilityOf[jobs.CloseNotifier](r, NotifyClosed)
		if err != nil {
			return registration{}, err
		}
		wake, stop, err := s.NotifyClosed(ctx, jobID)
		return registration{wake, stop}, err
	}, func(registration) Results { return Results{} })
	return v.wake, v.stop, err
}

// RecordLookup implements jobs.LookupStore.
func (r *recorder) RecordLookup(ctx context.Context, l jobs.AttemptLookup) error {
	_, err := record(r, RecordLookup, Args{Lookup: &l}, func() (struct{}, error) {
		s, err := capabilityOf[jobs.LookupStore](r, RecordLookup)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, s.RecordLookup(ctx, l)
	}, noResults)
	return err
}

// ReconcileStates implements jobs.LookupStore.
func (r *recorder) ReconcileStates(ctx context.Context, attemptIDs []string) ([]jobs.ReconcileState, error) {
	return record(r, ReconcileStates, Args{AttemptIDs: attemptIDs}, func() ([]jobs.ReconcileState, error) {
		s, err := capabilityOf[jobs.LookupStore](r, ReconcileStates)
		if err != nil {
			return nil, err
		}
		return s.ReconcileStates(ctx, attemptIDs)
	}, func(rs []jobs.ReconcileState) Results { return Results{ReconcileStates: rs} })
}

// CountJobs implements jobs.JobCounter.
func (r *recorder) CountJobs(ctx context.Context, q jobs.JobQuery) (int64, error) {
	return record(r, CountJobs, Args{JobQuery: &q}, func() (int64, error) {
		s, err := capabilityOf[jobs.JobCounter](r, CountJobs)
		if err != nil {
			return 0, err
		}
		return s.CountJobs(ctx, q)
	}, func(n int64) Results { return Results{Count: n} })
}

// ListAttempts implements jobs.AttemptLister.
func (r *recorder) ListAttempts(ctx context.Context, q jobs.AttemptQuery) ([]jobs.Attempt, error) {
	return record(r, ListAttempts, Args{AttemptQuery: &q}, func() ([]jobs.Attempt, error) {
		s, err := capabilityOf[jobs.AttemptLister](r, ListAttempts)
		if err != nil {
			return nil, err
		}
		return s.ListAttempts(ctx, q)
	}, func(as []jobs.Attempt) Results { return Results{Attempts: as} })
}
