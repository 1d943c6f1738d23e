package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// JobState is the state of a job. See the package documentation for the
// state machine.
type JobState string

// Job states.
const (
	JobPending   JobState = "pending"   // no attempt yet
	JobRunning   JobState = "running"   // at least one attempt started
	JobSucceeded JobState = "succeeded" // an attempt won the compare-and-swap; Result is set
	JobFailed    JobState = "failed"    // given up with FailJob
	JobCancelled JobState = "cancelled" // closed out of band with CancelJob
)

// Terminal reports whether s is succeeded, failed or cancelled.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// Valid reports whether s is one of the job states.
func (s JobState) Valid() bool {
	switch s {
	case JobPending, JobRunning, JobSucceeded, JobFailed, JobCancelled:
		return true
	}
	return false
}

// Job is the durable record of one intent: what an owner asked for under one
// idempotency key. It never changes except for its state, outcome and
// bookkeeping fields.
type Job struct {
	ID          string          `json:"id"`
	Owner       string          `json:"owner"`
	Key         string          `json:"key"`
	Kind        string          `json:"kind"`
	Provider    string          `json:"provider"` // the target provider
	Params      json.RawMessage `json:"params"`   // canonical JSON
	Fingerprint string          `json:"fingerprint"`

	State       JobState        `json:"state"`
	Version     int64           `json:"version"`      // incremented by every write that changes the outcome
	Attempts    int             `json:"attempts"`     // attempts started so far
	Result      json.RawMessage `json:"result"`       // set when State is JobSucceeded
	CompletedBy string          `json:"completed_by"` // the winning attempt's ID
	Reason      string          `json:"reason"`       // why the job failed or was cancelled

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	ClosedAt  time.Time `json:"closed_at"` // zero until the job is terminal

	// ReplacedBy names the job that took over this job's key, when this
	// job failed or was cancelled and the same intent was submitted again
	// under a KeyReuse policy that frees the key; empty otherwise. Key
	// still reads the key this job was submitted with, but GetByKey
	// returns the new job. See Manager.Replaced for the other direction.
	ReplacedBy string `json:"replaced_by,omitempty"`
}

// SubmitRequest describes an intent. Owner and Key identify it; Kind,
// Provider and Params are what it asks for, and are bound to the key.
type SubmitRequest struct {
	Owner    string          // who asks, e.g. a user or tenant ID from authentication
	Key      string          // the idempotency key the client chose for this intent
	Kind     string          // the operation, e.g. "charge" or "summarize"
	Provider string          // the target provider
	Params   json.RawMessage // any JSON value; compared in canonical form

	// IntentFields, if not empty, names the members of the Params object
	// that make up the intent: only they (with Kind and Provider) are
	// fingerprinted, so that a repeat whose other members differ, a
	// client's timestamp or trace ID say, is the same intent and returns the
	// job, while a change in one of them is still a key conflict. Params is
	// stored whole, as the first request gave it. The names themselves are
	// part of the fingerprint: a key first submitted with other
	// IntentFields (or none) is a conflict, never a silent guess. Params
	// must then be a JSON object; a named member it lacks counts as absent.
	IntentFields []string

	// Reuse says whether the key may be taken back from its job when that
	// job failed or was cancelled (see KeyReuse): the same intent then
	// creates a new job under the key, which GetByKey returns from then
	// on; the old job is kept as it was, with ReplacedBy naming the new
	// one. A key whose job still has an attempt starting, running or
	// unknown is not taken (see KeyReuse). The zero value, KeyReuseNever,
	// keeps a key bound to its job until it is purged. A different intent is a key conflict whatever
	// the policy. SubmitTx and SubmitPgxTx accept only KeyReuseNever.
	Reuse KeyReuse
}

// Submit records the intent described by req, once. The first call for an
// owner and key creates a pending job and reports created == true; every later
// call with the same intent returns that same job with created == false and
// writes nothing. Concurrent calls are resolved by the store's unique
// constraint on (owner, key): all of them return the one job.
//
// With req.Reuse set, a key whose job failed (or was cancelled, as the
// policy says) is taken back and bound to a new job for the same intent,
// in one atomic step of the store: created is true, and the new job's ID
// is new. Concurrent calls still return one job: exactly one of them
// creates it. A job that is pending, running or succeeded keeps its key,
// and so does a job whose attempt's result arrived after it was cancelled.
// While an attempt of the old job is starting, running or unknown, the key
// is not taken and Submit returns an *AttemptInFlightError naming the job
// and that attempt (matching ErrAttemptInFlight); nothing is written.
//
// Errors: ErrInvalidInput (nothing written), ErrKeyConflict when the key is
// bound to a different kind, provider or params (the existing job is named
// in the KeyConflictError and unchanged), ErrAttemptInFlight (only with
// req.Reuse), ErrStorage.
func (m *Manager) Submit(ctx context.Context, req SubmitRequest) (Job, bool, error) {
	return m.submit(ctx, req, m.store.CreateJob)
}

// SubmitTx is Submit inside the caller's own transaction (a *sql.Tx or
// *sqlx.Tx on the store's database; for a pgx.Tx, see SubmitPgxTx): the job
// exists only if tx commits, so it can be written together with the
// caller's own rows. On a store that cannot write in a caller's
// transaction (one that is not a TxStore, such as memstore) it returns an
// error matching errors.ErrUnsupported, having written nothing.
//
// Concurrent submits of the same key wait on the uncommitted row and then see
// it, as with Submit. SubmitTx never retries inside tx: when tx conflicts
// with a concurrent write it returns at once a *StorageError of kind
// StorageConflict (matching ErrStorage), and tx can do nothing more; roll it
// back and run it again from the start. That happens on PostgreSQL under
// REPEATABLE READ or SERIALIZABLE when another transaction committed the same
// key after tx took its snapshot (SQLSTATE 40001), or on a deadlock with
// another transaction (40P01); use READ COMMITTED (the default) to wait for a
// concurrent duplicate and return it instead. On SQLite it happens in a
// deferred transaction (BEGIN without IMMEDIATE) that must upgrade to a write
// while another connection writes (SQLITE_BUSY), or after another
// connection committed since tx read (SQLITE_BUSY_SNAPSHOT); begin tx with
// the write lock (the _txlock=immediate connection parameter, as OpenSQLite's
// handles do) to wait for the lock at BEGIN instead.
//
// SubmitTx takes back no key: a req.Reuse other than KeyReuseNever is
// ErrInvalidInput, and nothing is written. Use Submit to reuse a key.
func (m *Manager) SubmitTx(ctx context.Context, tx DBTX, req SubmitRequest) (Job, bool, error) {
	if err := reuseInTx(req); err != nil {
		return Job{}, false, err
	}
	s, ok := m.store.(TxStore)
	if !ok {
		return Job{}, false, fmt.Errorf("jobs: SubmitTx on a %T, which cannot write in a transaction of the caller's: %w", m.store, errors.ErrUnsupported)
	}
	return m.submit(ctx, req, func(ctx context.Context, j Job) (Job, bool, error) {
		return s.CreateJobTx(ctx, tx, j)
	})
}

func (m *Manager) submit(ctx context.Context, req SubmitRequest, create func(context.Context, Job) (Job, bool, error)) (Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return Job{}, false, err
	}
	canon, err := m.validateSubmit(req)
	if err != nil {
		return Job{}, false, err
	}
	fingerprint, err := fingerprintOf(req, canon)
	if err != nil {
		return Job{}, false, err
	}
	now := m.now()
	j := Job{
		ID:          newID(jobPrefix, now),
		Owner:       req.Owner,
		Key:         req.Key,
		Kind:        req.Kind,
		Provider:    req.Provider,
		Params:      canon,
		Fingerprint: fingerprint,
		State:       JobPending,
		Version:     1,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	start := time.Now()
	got, created, err := create(ctx, j)
	if err != nil {
		return Job{}, false, err
	}
	var replaced string
	if !created && got.Fingerprint == j.Fingerprint && req.Reuse.Frees(got.State) {
		// The same intent, whose job ended without a result, under a
		// policy that frees its key: retire the key and create j under it,
		// once. Whoever holds the key afterwards is the answer.
		old := got.ID
		got, created, err = m.store.ReplaceJob(ctx, JobReplacement{OldID: old, From: req.Reuse.states(), New: j})
		if err != nil {
			return Job{}, false, err
		}
		if created {
			replaced = old
		}
	}
	if !created && got.Fingerprint != j.Fingerprint {
		m.emit(ctx, Event{Type: EventKeyConflict, JobID: got.ID, Owner: req.Owner, Kind: req.Kind, Duration: time.Since(start)})
		return Job{}, false, &KeyConflictError{Owner: req.Owner, Key: req.Key, JobID: got.ID}
	}
	typ := EventJobReplayed
	if created {
		typ = EventJobCreated
	}
	m.emit(ctx, Event{Type: typ, JobID: got.ID, Owner: got.Owner, Kind: got.Kind, Provider: got.Provider, Replaces: replaced, Duration: time.Since(start)})
	return got, created, nil
}

// Get returns the job with the given ID. Errors: ErrNotFound, ErrStorage.
func (m *Manager) Get(ctx context.Context, jobID string) (Job, error) {
	if err := m.checkID(ctx, "job ID", jobID); err != nil {
		return Job{}, err
	}
	return m.store.Job(ctx, jobID)
}

// GetByKey returns the job bound to owner and key.
// Errors: ErrInvalidInput, ErrNotFound, ErrStorage.
func (m *Manager) GetByKey(ctx context.Context, owner, key string) (Job, error) {
	if err := ctx.Err(); err != nil {
		return Job{}, err
	}
	if err := checkName("Owner", owner); err != nil {
		return Job{}, err
	}
	if err := checkName("Key", key); err != nil {
		return Job{}, err
	}
	return m.store.JobByKey(ctx, owner, key)
}

// FailJob gives up on the job: it becomes failed with the given reason and
// accepts no new attempt. It is refused with ErrAttemptInFlight while any
// attempt is starting, running or unknown, since that provider may still
// deliver; resolve those attempts first, or use CancelJob. Failing a job that
// is already failed returns it unchanged.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrAttemptInFlight, ErrJobClosed
// (succeeded or cancelled), ErrStorage.
func (m *Manager) FailJob(ctx context.Context, jobID, reason string) (Job, error) {
	return m.closeJob(ctx, jobID, JobFailed, reason)
}

// CancelJob closes the job out of band: it becomes cancelled at once, accepts
// no new attempt, and any result that arrives later is dropped. Attempts in
// flight keep their state so that their truth can still be recorded.
// Cancelling a job that is already cancelled returns it unchanged.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrJobClosed (succeeded or failed),
// ErrStorage.
func (m *Manager) CancelJob(ctx context.Context, jobID, reason string) (Job, error) {
	return m.closeJob(ctx, jobID, JobCancelled, reason)
}

func (m *Manager) closeJob(ctx context.Context, jobID string, to JobState, reason string) (Job, error) {
	if err := m.checkID(ctx, "job ID", jobID); err != nil {
		return Job{}, err
	}
	if err := checkText("Reason", reason); err != nil {
		return Job{}, err
	}
	start := time.Now()
	wctx, cancel := m.writeContext(ctx)
	defer cancel()
	j, err := m.store.CloseJob(wctx, JobClose{ID: jobID, To: to, Reason: reason, At: m.now()})
	if err != nil {
		var closed *JobClosedError
		if errors.As(err, &closed) && closed.State == to {
			// Already there: a retried call after an ambiguous failure.
			return m.store.Job(ctx, jobID)
		}
		return Job{}, err
	}
	typ := EventJobFailed
	if to == JobCancelled {
		typ = EventJobCancelled
	}
	m.emit(ctx, Event{Type: typ, JobID: j.ID, Owner: j.Owner, Kind: j.Kind, Reason: reason, Duration: time.Since(start)})
	return j, nil
}
