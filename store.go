package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// Store persists jobs and attempts: the core that every store implements,
// and the whole contract the Manager's verbs (Submit, StartAttempt,
// Complete and the rest) need. The Manager validates input, builds IDs and
// fingerprints, runs the state machines and interprets the answers; a
// Store only persists, and enforces the invariants atomically in its
// database, also against concurrent callers in other processes:
//
//   - at most one job per (Owner, Key), a job whose key ReplaceJob retired
//     no longer holding it;
//   - at most one attempt per job starting or unknown at any time, and no
//     new attempt while one is, nor while one is running unless hedging was
//     asked for, nor on a terminal job;
//   - a job is completed by at most one attempt, through a compare-and-swap
//     on its version (see cas.go);
//   - a terminal attempt or job never changes again;
//   - every method takes full effect or none.
//
// Each method's comment names the errors it must return; errors of the
// database itself are returned as *StorageError, and no driver error type
// may reach the caller.
//
// What only one feature needs is a capability of its own, an interface
// that a store implements or not, found by type assertion as http.Flusher
// is: TxStore (Manager.SubmitTx), PgxTxStore (SubmitPgxTx), JobLister
// (listing, for tools and invariant checks), ClaimStore (reconcilers),
// VerificationStore (provider verification and the failover rule),
// PurgeStore (retention), CloseNotifier (Wait without polling), and for
// operators' tools JobCounter, AttemptLister and LookupStore (the last
// lookup of an attempt in doubt, which a Reconciler records). The
// feature that needs one says so, with an error matching
// errors.ErrUnsupported, where the store lacks it.
//
// PostgresStore and SQLiteStore implement the Store and every capability
// (LookupStore from schema version 2) but PgxTxStore and CloseNotifier,
// which only PostgresStore has. Package memstore is a small in-memory
// implementation to copy from, and package jobstest the conformance suite
// that proves an implementation, running the cases of each capability the
// store has.
type Store interface {
	// Jobs.

	// CreateJob stores j (ID, Owner, Key, Kind, Provider, Params,
	// Fingerprint and CreatedAt set; State pending, Version 1) unless a job
	// with the same Owner and Key exists. It returns the stored job and
	// created == true, or the existing job and created == false, having
	// written nothing. Of concurrent calls with one Owner and Key, exactly
	// one creates the job and all return it.
	CreateJob(ctx context.Context, j Job) (job Job, created bool, err error)
	// ReplaceJob is CreateJob for a key that may be bound to a job that
	// ended without a result, which r.New is to replace. In one atomic
	// step: if the job r.OldID still holds r.New's Owner and Key, is in one
	// of the states r.From, and none of its attempts may still act or has
	// acted (none is starting, running or unknown, and none has
	// ResultDropped), its key is retired: the job then holds
	// RetiredKey(r.New.Key, r.New.ID) instead, so that reading it returns
	// Key r.New.Key and ReplacedBy r.New.ID, and JobByKey with that retired
	// key finds it; nothing else of it changes (not its state, version,
	// attempts, outcome or update time). r.New is then created as by
	// CreateJob, and returned with created == true. Either both happen or
	// neither does. The attempts are read in the same atomic step as the
	// key is retired, never by a read before it: an attempt in doubt may
	// still make the provider act, and a second job under the key would
	// then run the intent twice.
	//
	// If nothing is retired because an attempt of that job is starting,
	// running or unknown, ReplaceJob writes nothing and returns an
	// *AttemptInFlightError naming the job r.OldID and the attempt.
	// Otherwise (the job is gone, holds the key no longer, is in another
	// state, or has an attempt whose result was dropped) nothing is
	// retired, and ReplaceJob is CreateJob(r.New): it returns the job that
	// holds the key now, or creates r.New if none does. So a job that is
	// not in one of r.From, pending or running say, is returned as it is,
	// with created == false. Of concurrent calls for one old job, at most
	// one retires its key, and all return the job that then holds it. A
	// call retires at most one job.
	//
	// It refuses with the *InputError of r.Check, writing nothing, an r
	// without OldID or New.ID, or whose From is empty or names a state
	// that is not terminal.
	ReplaceJob(ctx context.Context, r JobReplacement) (job Job, created bool, err error)

	// Job returns the job with the given ID, or ErrNotFound.
	Job(ctx context.Context, id string) (Job, error)

	// JobByKey returns the job bound to owner and key, or ErrNotFound.
	JobByKey(ctx context.Context, owner, key string) (Job, error)

	// CloseJob moves an open (pending or running) job to c.To, failed or
	// cancelled, with Version+1, c.Reason and ClosedAt. For JobFailed it
	// refuses with an *AttemptInFlightError while any attempt is starting,
	// running or unknown. A terminal job is refused with a *JobClosedError
	// carrying its state. ErrNotFound if there is no such job. A close that
	// c.Check refuses writes nothing.
	CloseJob(ctx context.Context, c JobClose) (Job, error)

	// Attempts.

	// Attempt returns the attempt with the given ID, or ErrNotFound.
	Attempt(ctx context.Context, id string) (Attempt, error)

	// Attempts returns the job's attempts ordered by Seq, or ErrNotFound if
	// there is no such job.
	Attempts(ctx context.Context, jobID string) ([]Attempt, error)

	// CreateAttempt records a new attempt in state starting, with Seq one
	// more than the job's previous attempt, BaseVersion the job's current
	// version and Provider the job's provider when a.Provider is empty, and
	// moves a pending job to running. It refuses, writing nothing, with:
	//   - ErrNotFound if the job does not exist;
	//   - a *JobClosedError if the job is terminal;
	//   - an *AttemptInFlightError naming the blocking attempt if any
	//     attempt is starting or unknown, or running while a.Hedge is false.
	CreateAttempt(ctx context.Context, a NewAttempt) (Attempt, error)

	// UpdateAttempt moves the attempt u.ID to u.To if its state is one of
	// u.From, recording u.ProviderRef and u.Reason when not empty, and
	// FinishedAt when u.To is terminal. u.To may be one of u.From: an
	// unknown attempt that learns its provider reference late stays unknown
	// (From [unknown], To unknown, ProviderRef set).
	//
	// A recorded provider reference never changes: when u.ProviderRef is
	// not empty, the attempt must have none yet. If the attempt is in
	// another state, or already has a reference, it writes nothing and
	// returns the attempt as stored with a *TransitionError. Moving to
	// unknown while another attempt of the job is starting or unknown
	// writes nothing and returns an *AttemptInFlightError naming it: at most
	// one attempt per job is in doubt at any time. With u.ClaimToken set (a
	// reconciler's write), an attempt no longer claimed with that token is
	// left as it is and returned with an error matching ErrClaimLost,
	// whatever its state. ErrNotFound if there is no such attempt. An update
	// that u.Check refuses, or one of a terminal attempt (even one whose
	// state u.From names), writes nothing.
	UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error)

	// CompleteAttempt offers c.Result for the attempt's job: the
	// compare-and-swap of cas.go. If the attempt is starting, running or
	// unknown and its job is running, uncompleted and at the attempt's
	// BaseVersion, the job becomes succeeded with the result, CompletedBy
	// the attempt and Version+1, and the attempt succeeded. Otherwise, for
	// an open attempt, the result is stored nowhere, the attempt's Reason
	// becomes DroppedReason(job), and:
	//   - if another attempt completed the job, this one becomes lost and
	//     the error is a *LostRaceError naming the winner;
	//   - if the job was closed without a winner, this one becomes
	//     cancelled and the error is a *JobClosedError.
	// It returns the job and the attempt as they are after the call. If the
	// attempt is not open it writes nothing and returns both as stored with
	// a *TransitionError. With c.ClaimToken set, an attempt no longer
	// claimed with that token is left as it is, and so is its job, both
	// returned as stored with an error matching ErrClaimLost. ErrNotFound if
	// there is no such attempt.
	CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error)
}

// TxStore is a Store that can create a job inside a transaction the
// caller owns on the store's database, for Manager.SubmitTx.
type TxStore interface {
	// CreateJobTx is CreateJob inside tx: the job exists only if tx
	// commits. A conflict with a concurrent transaction that tx cannot
	// survive is a *StorageError of kind StorageConflict (the caller rolls
	// back and runs its transaction again).
	CreateJobTx(ctx context.Context, tx DBTX, j Job) (job Job, created bool, err error)
}

// JobLister is a Store that can list its jobs, for operators' tools,
// sweeps and invariant checks.
type JobLister interface {
	// ListJobs returns the jobs q selects, at most q.Limit of them, in ID
	// order (which is creation order), oldest first unless q.Newest.
	ListJobs(ctx context.Context, q JobQuery) ([]Job, error)
}

// JobQuery selects jobs for JobLister.ListJobs. A field left zero selects
// every job. Pages follow each other by the last ID of the page before
// (keyset pagination), so a page costs the same however deep it is.
type JobQuery struct {
	Owner         string     // only this owner's jobs
	States        []JobState // only jobs in one of these states
	Kind          string     // only jobs of this kind
	Provider      string     // only jobs for this (target) provider
	CreatedAfter  time.Time  // only jobs created at or after this
	CreatedBefore time.Time  // only jobs created before this

	Newest bool   // newest first (descending IDs); oldest first otherwise
	After  string // the last ID of the previous page: only jobs past it, in the order asked for
	Limit  int    // at most this many; 0 or less means 100
}

// Check reports a query no store may run: a state that is not a job
// state. The error is an *InputError. Stores call it first.
func (q JobQuery) Check() error {
	for _, s := range q.States {
		if !s.Valid() {
			return invalid("States", "%q is not a job state", s)
		}
	}
	return nil
}

// ClaimStore is a Store that lets reconcilers claim the attempts they
// examine (package failover's Reconciler). A reconciler claims an attempt
// before it asks the provider about it: a token and a lease (until
// AttemptClaim.Until). While the lease runs nobody else can claim the
// attempt; once it has run out another reconciler may take the attempt
// over with a claim of its own. The reconciler's writes present its token
// (ClaimToken in AttemptUpdate and Completion, and RenewClaim); once the
// attempt is claimed with another token they are refused with
// ErrClaimLost, so an attempt is resolved once however long a lookup took.
// Writes without a token, a runner's own, ignore claims: a real result is
// always welcome. A Store that is not a ClaimStore must refuse a write
// with a ClaimToken with an error matching errors.ErrUnsupported.
type ClaimStore interface {
	// StaleAttempts returns up to q.Limit attempts that are unknown and
	// were last updated before q.UnknownBefore, or starting or running and
	// last updated before q.OpenBefore, least recently updated first; when
	// q.UnclaimedAt is not zero, only those not claimed beyond it.
	StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error)

	// ClaimAttempt claims the attempt c.ID with c.Token until c.Until, if
	// it is still open, in state c.State and last updated at c.UpdatedAt
	// (as StaleAttempts read it), and not claimed beyond c.At. It returns
	// the attempt and true if it did, or false, having written nothing
	// (always for a terminal c.State). Of several reconcilers racing for
	// one attempt, exactly one claims it. A claim that c.Check refuses
	// writes nothing.
	ClaimAttempt(ctx context.Context, c AttemptClaim) (Attempt, bool, error)

	// RenewClaim moves the end of the claim c.Token on attempt c.ID to
	// c.Until, sooner or later, if the attempt is still claimed with that
	// token, and reports whether it was; if not, it writes nothing. It
	// reads only c.ID, c.Token and c.Until.
	RenewClaim(ctx context.Context, c AttemptClaim) (bool, error)
}

// VerificationStore is a Store that records provider verifications, for
// Manager.VerifyProvider and the rule that a failover attempt needs a
// verified provider (Manager.CheckFailover, StartAttempt).
type VerificationStore interface {
	// RecordVerification stores v as given (ID set by the caller).
	RecordVerification(ctx context.Context, v Verification) error

	// Verifications returns the verifications matching f, newest first
	// (VerifiedAt, then ID, descending), at most f.Limit of them.
	Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error)
}

// PurgeStore is a Store that can delete old jobs, for Manager.Purge and
// the Purger.
type PurgeStore interface {
	// PurgeJobs deletes up to q.Limit jobs, with their attempts, that are
	// terminal, closed before q.Before, and whose attempts are all
	// terminal, oldest first, and reports what it deleted; with q.DryRun it
	// deletes nothing and counts every such job, without limit. It must
	// not block, or be blocked for long by, concurrent writers and other
	// purgers, and must never delete an open job or a job with an open
	// attempt: such an attempt may still act, and its job holds the key
	// that keeps the intent from running twice.
	PurgeJobs(ctx context.Context, q PurgeQuery) (PurgeCount, error)
}

// JobCounter is a Store that can count the jobs a JobQuery selects, for
// operators' tools (package inspect, jobsctl count, the console).
type JobCounter interface {
	// CountJobs counts the jobs q selects, ignoring q.After, q.Limit and
	// q.Newest.
	CountJobs(ctx context.Context, q JobQuery) (int64, error)
}

// AttemptLister is a Store that can list attempts across jobs, for
// operators' tools: to find an attempt by its provider's reference, to
// list the attempts in doubt, to sum up a provider's recent attempts.
type AttemptLister interface {
	// ListAttempts returns the attempts q selects, at most q.Limit of
	// them, in ID order (which is creation order), oldest first unless
	// q.Newest.
	ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error)
}

// AttemptQuery selects attempts for AttemptLister.ListAttempts. A field
// left zero selects every attempt. Pages follow each other by the last ID
// of the page before, as with JobQuery.
type AttemptQuery struct {
	ProviderRef   string         // only the attempts with this provider reference
	Provider      string         // only attempts against this provider
	States        []AttemptState // only attempts in one of these states
	CreatedAfter  time.Time      // only attempts created at or after this
	CreatedBefore time.Time      // only attempts created before this

	Newest bool   // newest first (descending IDs); oldest first otherwise
	After  string // the last ID of the previous page
	Limit  int    // at most this many; 0 or less means 100
}

// Check reports a query no store may run: a state that is not an attempt
// state. The error is an *InputError. Stores call it first.
func (q AttemptQuery) Check() error {
	for _, s := range q.States {
		if !s.Valid() {
			return invalid("States", "%q is not an attempt state", s)
		}
	}
	return nil
}

// LookupStore is a Store that records, durably, the last time someone
// asked an attempt's provider what became of it, and the answer: package
// failover's Reconciler records each lookup it makes through it, and an
// operator's console shows it beside the attempt in doubt. It is optional:
// a Reconciler on a store without it resolves attempts all the same, and
// records no lookups.
type LookupStore interface {
	// RecordLookup records l as the attempt's last lookup, replacing the
	// one before, whatever the attempt's state; it changes nothing else of
	// the attempt (not its state, reason or update time). ErrNotFound if
	// there is no such attempt. A lookup that l.Check refuses writes
	// nothing.
	RecordLookup(ctx context.Context, l AttemptLookup) error

	// ReconcileStates returns, for each of the attempts named that exists,
	// its last lookup and the reconciler's latest claim on it, in no
	// particular order. Attempts never looked up or claimed have zero
	// fields there; IDs of no attempt are left out.
	ReconcileStates(ctx context.Context, attemptIDs []string) ([]ReconcileState, error)
}

// AttemptLookup is one question to an attempt's provider, and its answer.
type AttemptLookup struct {
	AttemptID string
	At        time.Time
	// Answer is what the provider said ("pending", "succeeded", "failed:
	// why", "not_found"), or why it could not be asked ("error: …",
	// "unsupported: …"); at most 4096 bytes.
	Answer string
}

// Check reports a lookup no store may record: one without an attempt,
// time or answer, or with an answer too long. The error is an
// *InputError. Stores call it first.
func (l AttemptLookup) Check() error {
	switch {
	case l.AttemptID == "":
		return invalid("AttemptID", "empty")
	case l.At.IsZero():
		return invalid("At", "zero")
	case l.Answer == "":
		return invalid("Answer", "empty")
	}
	return checkText("Answer", l.Answer)
}

// ReconcileState is what LookupStore.ReconcileStates reads of an attempt:
// its last lookup (zero LookupAt if none) and the latest reconciler claim.
type ReconcileState struct {
	AttemptID    string
	LookupAt     time.Time
	LookupAnswer string
	ClaimToken   string    // the latest claim's token; empty if never claimed
	ClaimedUntil time.Time // the end of that claim's lease
}

// JobReplacement is the input of Store.ReplaceJob.
type JobReplacement struct {
	OldID string     // the job whose key New may take
	From  []JobState // the states, all terminal, in which OldID gives up its key (one to three)
	New   Job        // the job to create, as for CreateJob
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
	// Reconciler sets it to the token of its claim on the attempt: the
	// update then applies only while the attempt is still claimed with that
	// token, and otherwise fails with ErrClaimLost.
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

// StaleQuery is the input of Store.StaleAttempts.
type StaleQuery struct {
	UnknownBefore time.Time // unknown attempts last updated before this
	OpenBefore    time.Time // starting and running attempts last updated before this

	// UnclaimedAt, if not zero, leaves out the attempts whose claim lasts
	// beyond it: those a reconciler is examining. Zero lists them too.
	UnclaimedAt time.Time

	Limit int
}

// AttemptClaim is the input of Store.ClaimAttempt and Store.RenewClaim.
type AttemptClaim struct {
	ID        string
	State     AttemptState // as read by StaleAttempts
	UpdatedAt time.Time    // as read by StaleAttempts
	Token     string       // names the claim; the writes that resolve the attempt present it
	At        time.Time    // when the claim is taken: a claim lasting beyond At holds
	Until     time.Time    // when the claim's lease ends
}

// Check reports an update that no store may make, before anything is
// written: To must be running, unknown, failed or cancelled (an attempt
// starts only through CreateAttempt, and succeeds or loses only through the
// compare-and-swap of CompleteAttempt). The error is an *InputError.
// Stores call it first.
func (u AttemptUpdate) Check() error {
	switch u.To {
	case AttemptRunning, AttemptUnknown, AttemptFailed, AttemptCancelled:
		return nil
	}
	return invalid("To", "%q: an update moves an attempt to running, unknown, failed or cancelled", u.To)
}

// Check reports a close that no store may make: a job is closed as failed
// or cancelled, and succeeds only through CompleteAttempt. The error is an
// *InputError. Stores call it first.
func (c JobClose) Check() error {
	if c.To != JobFailed && c.To != JobCancelled {
		return invalid("To", "%q: a job is closed as failed or cancelled", c.To)
	}
	return nil
}

// Check reports a claim that no store may take or renew: one without a
// token, which the reconciler's writes could not present. The error is an
// *InputError. Stores call it first, in ClaimAttempt and RenewClaim.
func (c AttemptClaim) Check() error {
	if c.Token == "" {
		return invalid("Token", "empty")
	}
	return nil
}

// VerificationFilter selects verifications. Empty fields match everything.
type VerificationFilter struct {
	Provider        string
	Kind            string
	ContractVersion string
	Limit           int // at most this many, newest first; <= 0 means 100
}

// PurgeQuery is the input of Store.PurgeJobs.
type PurgeQuery struct {
	Before time.Time // jobs closed before this (and so created before it) are purged
	Limit  int       // at most this many jobs, the oldest created first
	DryRun bool      // count, without limit, and delete nothing
}

// PurgeCount counts jobs and attempts removed (or removable) by a purge.
type PurgeCount struct {
	Jobs     int64 `json:"jobs"`
	Attempts int64 `json:"attempts"`
}

// CloseNotifier is implemented by stores that can announce that a job may
// have reached a terminal state, so that Manager.Wait need not poll for it.
// It is optional: without it, Wait polls. PostgresStore implements it with
// LISTEN/NOTIFY.
type CloseNotifier interface {
	// NotifyClosed registers interest in the job jobID. It returns once the
	// store is listening, so that a job closed after the call returns is
	// never missed. The channel receives a value whenever the job may have
	// become terminal, and also when notifications may have been lost (after
	// the store reconnected); the receiver then reads the job again. stop
	// ends the registration and must be called. An error matching
	// errors.ErrUnsupported means the store cannot notify; any other error
	// means it cannot now. Callers then poll.
	NotifyClosed(ctx context.Context, jobID string) (wake <-chan struct{}, stop func(), err error)
}

// DBTX is what *sql.DB, *sql.Tx, *sql.Conn, *sqlx.DB and *sqlx.Tx have in
// common: enough to run a statement in the caller's transaction.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
