package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
)

// Store is an in-memory jobs.Store, safe for concurrent use. Create one
// with New.
type Store struct {
	// mu guards everything below. Every method holds it from its first
	// read to its last write, so that each takes full effect or none, and
	// concurrent calls take effect one after the other.
	mu sync.Mutex

	jobs     map[string]*job     // by ID
	keys     map[ownerKey]*job   // the unique constraint on (Owner, Key)
	ids      []string            // every job's ID, sorted, for ListJobs
	attempts map[string]*attempt // by ID, across jobs

	verifications map[string]jobs.Verification // by ID

	waiters map[string]map[chan struct{}]bool // NotifyClosed's channels, by job ID
}

// ownerKey is what binds a job to its intent.
type ownerKey struct{ owner, key string }

// job is a stored job and its attempts.
type job struct {
	jobs.Job
	tries []*attempt // its attempts, in Seq order
}

// attempt is a stored attempt and a reconciler's claim on it.
type attempt struct {
	jobs.Attempt
	claimToken   string    // the token of the latest claim; empty if never claimed
	claimedUntil time.Time // the end of that claim's lease
	lookupAt     time.Time // the last lookup (LookupStore); zero if none
	lookupAnswer string
}

var (
	_ jobs.Store         = (*Store)(nil)
	_ jobs.CloseNotifier = (*Store)(nil)
)

// defaultLimit is how many attempts StaleAttempts, and how many
// verifications Verifications, return when the query sets no limit.
const defaultLimit = 100

// New returns an empty store.
func New() *Store {
	return &Store{
		jobs:          map[string]*job{},
		keys:          map[ownerKey]*job{},
		attempts:      map[string]*attempt{},
		verifications: map[string]jobs.Verification{},
		waiters:       map[string]map[chan struct{}]bool{},
	}
}

// lock takes the store's mutex, unless ctx is done: then, as a database
// would, it runs nothing and returns ctx's error.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	return nil
}

// findJob returns the stored job with the given ID, or ErrNotFound.
func (s *Store) findJob(id string) (*job, error) {
	j, ok := s.jobs[id]
	if !ok {
		return nil, fmt.Errorf("memstore: job %s: %w", id, jobs.ErrNotFound)
	}
	return j, nil
}

// findAttempt returns the stored attempt with the given ID, or ErrNotFound.
func (s *Store) findAttempt(id string) (*attempt, error) {
	a, ok := s.attempts[id]
	if !ok {
		return nil, fmt.Errorf("memstore: attempt %s: %w", id, jobs.ErrNotFound)
	}
	return a, nil
}

// export returns the job as callers see it: a copy that shares no memory
// with the stored one, so that nothing a caller does to it changes the
// store.
func (j *job) export() jobs.Job {
	out := j.Job
	out.Params = slices.Clone(j.Params)
	out.Result = slices.Clone(j.Result)
	return out
}

// export returns the attempt as callers see it, without the claim.
func (a *attempt) export() jobs.Attempt { return a.Attempt }

// inFlight reports a as the attempt that refused a request.
func (a *attempt) inFlight() *jobs.AttemptInFlightError {
	return &jobs.AttemptInFlightError{JobID: a.JobID, AttemptID: a.ID, State: a.State}
}

// checkNewID checks the ID of a new record as a primary key would: it is
// set, and no other record of its kind has it.
func checkNewID(field, id string, taken bool) error {
	switch {
	case id == "":
		return &jobs.InputError{Field: field, Problem: "empty"}
	case taken:
		return &jobs.InputError{Field: field, Problem: fmt.Sprintf("%q is taken", id)}
	}
	return nil
}

// checkJSON checks that v is one JSON value, as the SQL schemas do for
// params and results.
func checkJSON(field string, v json.RawMessage) error {
	if !json.Valid(v) {
		return &jobs.InputError{Field: field, Problem: "not one valid JSON value"}
	}
	return nil
}
