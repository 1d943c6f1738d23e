package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// Store persists jobs and attempts. The Manager validates input, builds IDs
// and fingerprints and interprets the answers; a Store only persists, and
// enforces the invariants atomically, in its database, also against
// concurrent callers in other processes:
//
//   - at most one job per (Owner, Key);
//   - at most one attempt per job starting or unknown at any time, and no
//     new attempt while one is, nor while one is running unless hedging was
//     asked for, nor on a terminal job;
//   - a job is completed by at most one attempt, through a compare-and-swap on
//     its version;
//   - every method takes full effect or none.
//
// Each method's comment names the errors it must return. Errors of the
// database itself are returned as *StorageError. The conformance suite in
// package jobstest checks an implementation against this contract.
type Store interface {
	// CreateJob stores j (ID, Owner, Key, Kind, Provider, Params, Fingerprint,
	// CreatedAt set; State pending, Version 1) unless a job with the same
	// Owner and Key exists. It returns the stored job and created == true, or
	// the existing job and created == false, having written nothing.
	CreateJob(ctx context.Context, j Job) (job Job, created bool, err error)

	// Job returns the job with the given ID, or ErrNotFound.
	Job(ctx context.Context, id string) (Job, error)

	// JobByKey returns the job bound to owner and key, or ErrNotFound.
	JobByKey(ctx context.Context, owner, key string) (Job, error)

	// Attempt returns the attempt with the given ID, or ErrNotFound.
	Attempt(ctx context.Context, id string) (Attempt, error)

	// Attempts returns the job's attempts ordered by Seq, or ErrNotFound if
	// there is no such job.
	Attempts(ctx context.Context, jobID string) ([]Attempt, error)

	// CreateAttempt records a new attempt in state starting, with Seq one more
	// than the job's previous attempt, BaseVersion the job's current version
	// and Provider the job's provider when a.Provider is empty, and moves a
	// pending job to running. It refuses, writing nothing, with:
	//   - ErrNotFound if the job does not exist;
	//   - a *JobClosedError if the job is terminal;
	//   - an *AttemptInFlightError naming the blocking attempt if any attempt
	//     is starting or unknown, or running while a.Hedge is false.
	CreateAttempt(ctx context.Context, a NewAttempt) (Attempt, error)

	// UpdateAttempt moves the attempt u.ID to u.To if its state is one of
	// u.From, recording u.ProviderRef and u.Reason when not empty, and
	// FinishedAt when u.To is terminal. u.To may be one of u.From: an
	// unknown attempt that learns its provider reference late stays unknown
	// (From [unknown], To unknown, ProviderRef set).
	//
	// A recorded provider reference never changes: when u.ProviderRef is not
	// empty, the attempt must have none yet. If the attempt is in another
	// state, or already has a reference, it writes nothing and returns the
	// attempt as stored together with a *TransitionError. Moving to unknown
	// while another attempt of the job is starting or unknown writes nothing
	// and returns an *AttemptInFlightError naming it: at most one attempt per
	// job is in doubt at any time. ErrNotFound if there is no such attempt.
	// With u.ClaimToken set (a reconciler's write), an attempt no longer
	// claimed with that token is left as it is and returned with an error
	// matching ErrClaimLost, whatever its state. All of it is one atomic step,
	// also against concurrent callers.
	UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error)

	// CompleteAttempt offers c.Result for the attempt's job. If the attempt is
	// starting, running or unknown and its job is running, uncompleted and at
	// the attempt's BaseVersion, the job becomes succeeded with the result,
	// CompletedBy the attempt and Version+1, and the attempt succeeded.
	// Otherwise, for an open attempt, the result is stored nowhere and:
	//   - if another attempt completed the job, this one becomes lost and the
	//     error is a *LostRaceError naming the winner;
	//   - if the job was closed without a winner, this one becomes cancelled
	//     and the error is a *JobClosedError.
	// It returns the job and the attempt as they are after the call. If the
	// attempt is not open it writes nothing and returns both as stored with a
	// *TransitionError. ErrNotFound if there is no such attempt. With
	// c.ClaimToken set (a reconciler's write, only ever sent to a
	// ReconcileStore), an attempt no longer claimed with that token is left
	// as it is, and so is its job, both returned as stored with an error
	// matching ErrClaimLost. All of it is one atomic step.
	CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error)

	// CloseJob moves an open (pending or running) job to c.To, failed or
	// cancelled, with Version+1, c.Reason and ClosedAt. For JobFailed it
	// refuses with an *AttemptInFlightError while any attempt is starting,
	// running or unknown. A terminal job is refused with a *JobClosedError
	// carrying its state. ErrNotFound if there is no such job.
	CloseJob(ctx context.Context, c JobClose) (Job, error)
}

// NewAttempt is the input of Store.CreateAttempt.
type NewAttempt struct {
	ID       string
	JobID    string
	Provider string // empty: the job's provider
	Hedge    bool   // may start while another attempt is running
	At       time.Time
}

// AttemptUpdate is the input of Store.UpdateAttempt.
type AttemptUpdate struct {
	ID          string
	From        []AttemptState
	To          AttemptState
	ProviderRef string
	Reason      string
	At          time.Time

	// ClaimToken is empty for the writes of runners and callers, which
	// ignore reconcilers' claims: a real outcome is always recorded. A
	// Reconciler sets it to the token of its claim on the attempt (see
	// ReconcileStore): the update then applies only while the attempt is
	// still claimed with that token, and otherwise fails with ErrClaimLost.
	ClaimToken string
}

// Completion is the input of Store.CompleteAttempt.
type Completion struct {
	AttemptID string
	Result    json.RawMessage
	At        time.Time

	// ClaimToken is as in AttemptUpdate: empty for a runner's result, which
	// is offered whoever claims the attempt; a Reconciler's token, for a
	// result it looked up, which is offered only while its claim holds.
	ClaimToken string
}

// JobClose is the input of Store.CloseJob.
type JobClose struct {
	ID     string
	To     JobState // JobFailed or JobCancelled
	Reason string
	At     time.Time
}

// DBTX is what *sql.DB, *sql.Tx, *sql.Conn, *sqlx.DB and *sqlx.Tx have in
// common: enough to run a statement in the caller's transaction.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// TxStore is implemented by stores that can create a job inside a
// transaction the caller owns. See Manager.SubmitTx.
type TxStore interface {
	CreateJobTx(ctx context.Context, tx DBTX, j Job) (job Job, created bool, err error)
}

// Lister is implemented by stores that can enumerate their jobs, for
// operators' tools, invariant checks and tests.
type Lister interface {
	// ListJobs returns up to limit jobs with IDs greater than afterID, in ID
	// order (which is creation order).
	ListJobs(ctx context.Context, afterID string, limit int) ([]Job, error)
}
