// Package faultstore wraps a jobs.Store and makes it fail on purpose, the
// way a real database connection fails: before a statement runs (the
// connection was refused or reset), or after it committed, when the caller
// only sees a timeout and cannot tell whether the write happened (an
// ambiguous commit). Faults are drawn from a seeded generator, so a run with
// the same seed and the same sequence of calls fails the same way.
//
// It wraps every method of jobs.Store and of its capabilities (Methods
// lists them); a capability the wrapped store lacks answers with an error
// matching errors.ErrUnsupported. Reads fail only before they run; writes
// fail before or after.
//
// It is a test tool: use it to prove that the code above a Store is safe to
// retry, and check the store underneath with package invariant afterwards.
//
//	fs := faultstore.New(store, faultstore.Config{Seed: 1, Rate: 0.2, AfterShare: 0.5})
//	m, err := jobs.New(fs, jobs.Options{})
//	// … drive m, retrying on jobs.ErrStorage …
//	fmt.Println(fs.Stats().Total())
//	violations, err := invariant.Check(ctx, store)
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/intentjobs/jobs"
)

// Method names a Store method.
type Method string

// The methods of jobs.Store.
const (
	CreateJob       Method = "CreateJob"
	CreateJobTx     Method = "CreateJobTx"
	ReplaceJob      Method = "ReplaceJob"
	Job             Method = "Job"
	JobByKey        Method = "JobByKey"
	Attempt         Method = "Attempt"
	Attempts        Method = "Attempts"
	CreateAttempt   Method = "CreateAttempt"
	UpdateAttempt   Method = "UpdateAttempt"
	CompleteAttempt Method = "CompleteAttempt"
	CloseJob        Method = "CloseJob"
	ListJobs        Method = "ListJobs"

	StaleAttempts      Method = "StaleAttempts"
	ClaimAttempt       Method = "ClaimAttempt"
	RenewClaim         Method = "RenewClaim"
	RecordVerification Method = "RecordVerification"
	Verifications      Method = "Verifications"
	PurgeJobs          Method = "PurgeJobs"
	RecordLookup       Method = "RecordLookup"
	ReconcileStates    Method = "ReconcileStates"
	CountJobs          Method = "CountJobs"
	ListAttempts       Method = "ListAttempts"
)

// Methods lists every Method.
var Methods = []Method{CreateJob, CreateJobTx, ReplaceJob, Job, JobByKey, ListJobs, CloseJob, Attempt, Attempts, CreateAttempt,
	UpdateAttempt, CompleteAttempt, StaleAttempts, ClaimAttempt, RenewClaim, RecordVerification, Verifications, PurgeJobs,
	RecordLookup, ReconcileStates, CountJobs, ListAttempts}

// writes are the methods that change the store; only they can commit and
// then report an error.
var writes = map[Method]bool{CreateJob: true, CreateJobTx: true, ReplaceJob: true, CreateAttempt: true, UpdateAttempt: true,
	CompleteAttempt: true, CloseJob: true, ClaimAttempt: true, RenewClaim: true, RecordVerification: true, PurgeJobs: true,
	RecordLookup: true}

// Config says how often and how a Store fails.
type Config struct {
	// Seed seeds the generator that decides each call's fate.
	Seed uint64

	// Rate is the probability, in [0, 1], that a call fails, for every
	// method not listed in Rates.
	Rate float64

	// Rates overrides Rate per method.
	Rates map[Method]float64

	// AfterShare is the share, in [0, 1], of the faults of write methods
	// that happen after the write committed: the real store is called and
	// its answer replaced by a timeout. The others happen before the store
	// is called, and write nothing.
	AfterShare float64
}

// Kind says when a fault happened.
type Kind string

// Fault kinds.
const (
	Before Kind = "before" // nothing was called; nothing was written
	After  Kind = "after"  // the real store ran; its answer was replaced by an error
)

// Stats counts the faults injected so far.
type Stats struct {
	Calls  map[Method]int
	Faults map[Method]map[Kind]int
}

// Total returns the number of faults injected.
func (s Stats) Total() int {
	n := 0
	for _, byKind := range s.Faults {
		for _, c := range byKind {
			n += c
		}
	}
	return n
}

// TotalKind returns the number of faults of kind k injected.
func (s Stats) TotalKind(k Kind) int {
	n := 0
	for _, byKind := range s.Faults {
		n += byKind[k]
	}
	return n
}

// Store is a jobs.Store that injects faults into every method of the
// wrapped store. It is safe for concurrent use; with concurrent callers the
// order in which they draw from the generator, and so which call fails, is
// up to the scheduler.
type Store struct {
	inner jobs.Store
	cfg   Config

	mu      sync.Mutex
	rng     *rand.Rand
	enabled bool
	stats   Stats
}

// New wraps inner. Faults are enabled.
func New(inner jobs.Store, cfg Config) *Store {
	return &Store{
		inner:   inner,
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		enabled: true,
		stats:   Stats{Calls: map[Method]int{}, Faults: map[Method]map[Kind]int{}},
	}
}

// Inner returns the wrapped store.
func (s *Store) Inner() jobs.Store { return s.inner }

// SetEnabled turns fault injection on or off; calls are counted either way.
func (s *Store) SetEnabled(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enabled = on
}

// Stats returns a copy of the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Calls: map[Method]int{}, Faults: map[Method]map[Kind]int{}}
	for m, n := range s.stats.Calls {
		out.Calls[m] = n
	}
	for m, byKind := range s.stats.Faults {
		out.Faults[m] = map[Kind]int{}
		for k, n := range byKind {
			out.Faults[m][k] = n
		}
	}
	return out
}

// draw decides the fate of one call of m: "" (no fault), Before or After.
func (s *Store) draw(m Method) Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Calls[m]++
	rate, ok := s.cfg.Rates[m]
	if !ok {
		rate = s.cfg.Rate
	}
	// Always draw twice, so that the sequence of draws does not depend on
	// whether faults are enabled or which method is called.
	hit, after := s.rng.Float64() < rate, s.rng.Float64() < s.cfg.AfterShare
	if !s.enabled || !hit {
		return ""
	}
	k := Before
	if after && writes[m] {
		k = After
	}
	if s.stats.Faults[m] == nil {
		s.stats.Faults[m] = map[Kind]int{}
	}
	s.stats.Faults[m][k]++
	return k
}

// fault is the error a failed call returns: what a driver's error becomes
// after the store interprets it.
func fault(m Method, k Kind) error {
	msg := "injected fault: connection reset before the statement ran"
	if k == After {
		msg = "injected fault: timeout waiting for the commit to be acknowledged"
	}
	return &jobs.StorageError{Op: string(m), Kind: jobs.StorageUnavailable, Message: msg}
}

// call runs fn unless a Before fault is drawn, and replaces its error with a
// fault if an After fault is drawn.
func call[T any](s *Store, m Method, fn func() (T, error)) (T, error) {
	k := s.draw(m)
	if k == Before {
		var zero T
		return zero, fault(m, k)
	}
	v, err := fn()
	if k == After {
		var zero T
		return zero, fault(m, k)
	}
	return v, err
}

type jobCreated struct {
	j       jobs.Job
	created bool
}

type jobAttempt struct {
	j jobs.Job
	a jobs.Attempt
}

// CreateJob implements jobs.Store.
func (s *Store) CreateJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	r, err := call(s, CreateJob, func() (jobCreated, error) {
		j, created, err := s.inner.CreateJob(ctx, j)
		return jobCreated{j, created}, err
	})
	return r.j, r.created, err
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, id string) (jobs.Job, error) {
	return call(s, Job, func() (jobs.Job, error) { return s.inner.Job(ctx, id) })
}

// JobByKey implements jobs.Store.
func (s *Store) JobByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	return call(s, JobByKey, func() (jobs.Job, error) { return s.inner.JobByKey(ctx, owner, key) })
}

// Attempt implements jobs.Store.
func (s *Store) Attempt(ctx context.Context, id string) (jobs.Attempt, error) {
	return call(s, Attempt, func() (jobs.Attempt, error) { return s.inner.Attempt(ctx, id) })
}

// Attempts implements jobs.Store.
func (s *Store) Attempts(ctx context.Context, jobID string) ([]jobs.Attempt, error) {
	return call(s, Attempts, func() ([]jobs.Attempt, error) { return s.inner.Attempts(ctx, jobID) })
}

// CreateAttempt implements jobs.Store.
func (s *Store) CreateAttempt(ctx context.Context, a jobs.NewAttempt) (jobs.Attempt, error) {
	return call(s, CreateAttempt, func() (jobs.Attempt, error) { return s.inner.CreateAttempt(ctx, a) })
}

// UpdateAttempt implements jobs.Store. The attempt it returns with an error
// is kept only when the real store answered.
func (s *Store) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	return call(s, UpdateAttempt, func() (jobs.Attempt, error) { return s.inner.UpdateAttempt(ctx, u) })
}

// CompleteAttempt implements jobs.Store.
func (s *Store) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	r, err := call(s, CompleteAttempt, func() (jobAttempt, error) {
		j, a, err := s.inner.CompleteAttempt(ctx, c)
		return jobAttempt{j, a}, err
	})
	return r.j, r.a, err
}

// CloseJob implements jobs.Store.
func (s *Store) CloseJob(ctx context.Context, c jobs.JobClose) (jobs.Job, error) {
	return call(s, CloseJob, func() (jobs.Job, error) { return s.inner.CloseJob(ctx, c) })
}

// CreateJobTx implements jobs.TxStore.
func (s *Store) CreateJobTx(ctx context.Context, tx jobs.DBTX, j jobs.Job) (jobs.Job, bool, error) {
	r, err := call(s, CreateJobTx, func() (jobCreated, error) {
		c, err := capability[jobs.TxStore](s, CreateJobTx)
		if err != nil {
			return jobCreated{}, err
		}
		j, created, err := c.CreateJobTx(ctx, tx, j)
		return jobCreated{j, created}, err
	})
	return r.j, r.created, err
}

// ReplaceJob implements jobs.Store.
func (s *Store) ReplaceJob(ctx context.Context, r jobs.JobReplacement) (jobs.Job, bool, error) {
	c, err := call(s, ReplaceJob, func() (jobCreated, error) {
		j, created, err := s.inner.ReplaceJob(ctx, r)
		return jobCreated{j, created}, err
	})
	return c.j, c.created, err
}

// ListJobs implements jobs.JobLister.
func (s *Store) ListJobs(ctx context.Context, q jobs.JobQuery) ([]jobs.Job, error) {
	return call(s, ListJobs, func() ([]jobs.Job, error) {
		c, err := capability[jobs.JobLister](s, ListJobs)
		if err != nil {
			return nil, err
		}
		return c.ListJobs(ctx, q)
	})
}

// StaleAttempts implements jobs.ClaimStore.
func (s *Store) StaleAttempts(ctx context.Context, q jobs.StaleQuery) ([]jobs.Attempt, error) {
	return call(s, StaleAttempts, func() ([]jobs.Attempt, error) {
		c, err := capability[jobs.ClaimStore](s, StaleAttempts)
		if err != nil {
			return nil, err
		}
		return c.StaleAttempts(ctx, q)
	})
}

type attemptClaimed struct {
	a  jobs.Attempt
	ok bool
}

// ClaimAttempt implements jobs.ClaimStore.
func (s *Store) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	r, err := call(s, ClaimAttempt, func() (attemptClaimed, error) {
		cs, err := capability[jobs.ClaimStore](s, ClaimAttempt)
		if err != nil {
			return attemptClaimed{}, err
		}
		a, ok, err := cs.ClaimAttempt(ctx, c)
		return attemptClaimed{a, ok}, err
	})
	return r.a, r.ok, err
}

// RenewClaim implements jobs.ClaimStore.
func (s *Store) RenewClaim(ctx context.Context, c jobs.AttemptClaim) (bool, error) {
	return call(s, RenewClaim, func() (bool, error) {
		cs, err := capability[jobs.ClaimStore](s, RenewClaim)
		if err != nil {
			return false, err
		}
		return cs.RenewClaim(ctx, c)
	})
}

// RecordVerification implements jobs.VerificationStore.
func (s *Store) RecordVerification(ctx context.Context, v jobs.Verification) error {
	_, err := call(s, RecordVerification, func() (struct{}, error) {
		c, err := capability[jobs.VerificationStore](s, RecordVerification)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, c.RecordVerification(ctx, v)
	})
	return err
}

// Verifications implements jobs.VerificationStore.
func (s *Store) Verifications(ctx context.Context, f jobs.VerificationFilter) ([]jobs.Verification, error) {
	return call(s, Verifications, func() ([]jobs.Verification, error) {
		c, err := capability[jobs.VerificationStore](s, Verifications)
		if err != nil {
			return nil, err
		}
		return c.Verifications(ctx, f)
	})
}

// PurgeJobs implements jobs.PurgeStore.
func (s *Store) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	return call(s, PurgeJobs, func() (jobs.PurgeCount, error) {
		c, err := capability[jobs.PurgeStore](s, PurgeJobs)
		if err != nil {
			return jobs.PurgeCount{}, err
		}
		return c.PurgeJobs(ctx, q)
	})
}

// RecordLookup implements jobs.LookupStore.
func (s *Store) RecordLookup(ctx context.Context, l jobs.AttemptLookup) error {
	_, err := call(s, RecordLookup, func() (struct{}, error) {
		c, err := capability[jobs.LookupStore](s, RecordLookup)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, c.RecordLookup(ctx, l)
	})
	return err
}

// ReconcileStates implements jobs.LookupStore.
func (s *Store) ReconcileStates(ctx context.Context, attemptIDs []string) ([]jobs.ReconcileState, error) {
	return call(s, ReconcileStates, func() ([]jobs.ReconcileState, error) {
		c, err := capability[jobs.LookupStore](s, ReconcileStates)
		if err != nil {
			return nil, err
		}
		return c.ReconcileStates(ctx, attemptIDs)
	})
}

// CountJobs implements jobs.JobCounter.
func (s *Store) CountJobs(ctx context.Context, q jobs.JobQuery) (int64, error) {
	return call(s, CountJobs, func() (int64, error) {
		c, err := capability[jobs.JobCounter](s, CountJobs)
		if err != nil {
			return 0, err
		}
		return c.CountJobs(ctx, q)
	})
}

// ListAttempts implements jobs.AttemptLister.
func (s *Store) ListAttempts(ctx context.Context, q jobs.AttemptQuery) ([]jobs.Attempt, error) {
	return call(s, ListAttempts, func() ([]jobs.Attempt, error) {
		c, err := capability[jobs.AttemptLister](s, ListAttempts)
		if err != nil {
			return nil, err
		}
		return c.ListAttempts(ctx, q)
	})
}

// capability returns the wrapped store as the capability C, for the
// method m, or an error matching errors.ErrUnsupported if it lacks it.
func capability[C any](s *Store, m Method) (C, error) {
	c, ok := s.inner.(C)
	if !ok {
		return c, fmt.Errorf("faultstore: %s: the wrapped %T does not have it: %w", m, s.inner, errors.ErrUnsupported)
	}
	return c, nil
}

var (
	_ jobs.Store             = (*Store)(nil)
	_ jobs.TxStore           = (*Store)(nil)
	_ jobs.JobLister         = (*Store)(nil)
	_ jobs.ClaimStore        = (*Store)(nil)
	_ jobs.VerificationStore = (*Store)(nil)
	_ jobs.PurgeStore        = (*Store)(nil)
	_ jobs.LookupStore       = (*Store)(nil)
	_ jobs.JobCounter        = (*Store)(nil)
	_ jobs.AttemptLister     = (*Store)(nil)
)
