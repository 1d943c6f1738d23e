package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// SQLStore is what the two SQL stores, PostgresStore and SQLiteStore, offer:
// the Store, every capability both have, their database handle, what
// their schema looks like, and Close. Tools that work with either
// (jobsctl, tests) hold one of these.
type SQLStore interface {
	Store
	TxStore
	JobLister
	ClaimStore
	VerificationStore
	PurgeStore

	// DB returns the database handle the store writes through.
	DB() *sql.DB
	// Dialect returns Postgres or SQLite.
	Dialect() Dialect
	// DatabaseSchemaVersion reports the schema version recorded in the
	// database (0 if none).
	DatabaseSchemaVersion(ctx context.Context) (int, error)
	// AppliedMigrations lists the migrations recorded in the database,
	// oldest first; none if it has no version table yet.
	AppliedMigrations(ctx context.Context) ([]AppliedMigration, error)
	// Close closes the database handles the store opened itself; handles
	// passed in by the caller are left open.
	Close() error
}

var (
	_ SQLStore = (*PostgresStore)(nil)
	_ SQLStore = (*SQLiteStore)(nil)
)

// This file holds what the SQL stores share and no dialect decides: the
// handles, the column lists and the scanning of rows, running a query
// with the store's own error mapping, and the reads that explain a refused
// write. Every statement, and everything a dialect does its own way, is in
// the dialect's files (store_postgres*.go, store_sqlite*.go); the
// migration runner is in migrate.go.

// sqlHandles are a SQL store's database handles.
type sqlHandles struct {
	db    *sql.DB   // writes, and reads on PostgreSQL
	rdb   *sql.DB   // reads: a pool of their own on SQLite files
	owned []*sql.DB // opened by the store, closed by Close
}

// DB returns the database handle the store writes through.
func (h *sqlHandles) DB() *sql.DB { return h.db }

func (h *sqlHandles) closeOwned() error {
	var errs []error
	for _, db := range h.owned {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
}

// errorMapper is a SQL store's interpret method: it maps a driver's error
// to this package's errors (a *StorageError, or one of the unique
// violations below), so that no driver type reaches a caller.
type errorMapper interface {
	interpret(op string, err error) error
}

// errUniqueKey and errUniqueInDoubt are what interpret returns for the two
// unique violations the stores expect; they never leave the package.
var (
	errUniqueKey     = errors.New("unique violation: jobs (owner, idempotency_key)")
	errUniqueInDoubt = errors.New("unique violation: one attempt in doubt per job")
)

// passThrough handles what both dialects treat alike: nil, errors that are
// already this package's, sql.ErrNoRows (the caller decides what no row
// means) and context errors (kept matchable with errors.Is).
func passThrough(op string, err error) (error, bool) {
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		return err, true
	}
	var se *StorageError
	if errors.As(err, &se) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrClaimLost) ||
		errors.Is(err, errUniqueKey) || errors.Is(err, errUniqueInDoubt) {
		return err, true
	}
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return &StorageError{Op: op, Kind: StorageUnavailable, Message: ctxErr.Error(), cause: ctxErr}, true
		}
	}
	return nil, false
}

// keyStreak follows the keys a store's CreateJob meets: new ones in a row
// (n > 0) or taken ones in a row (n < 0), up to keyStreakLength either
// way. A new key is written by one plain insert; a replay is found by one
// read; a statement that does both in one step (PostgreSQL's insert in a
// common table expression) serves a mix, but costs either more than the
// statement made for it. Past a streak of new keys a store tries the plain
// insert first, past a streak of taken keys (retries, a storm of one key)
// the read; the first key that breaks the streak starts the other. Every
// path ends in the same answer: a miss falls through to the statement that
// decides, and only the cost differs.
type keyStreak struct{ n atomic.Int32 }

const keyStreakLength = 4

// newKeys reports whether the last keyStreakLength keys were new.
func (k *keyStreak) newKeys() bool { return k.n.Load() >= keyStreakLength }

// takenKeys reports whether the last keyStreakLength keys were taken.
func (k *keyStreak) takenKeys() bool { return k.n.Load() <= -keyStreakLength }

// record counts a key found new (created) or taken.
func (k *keyStreak) record(created bool) {
	switch n := k.n.Load(); {
	case created && n < 0:
		k.n.Store(1)
	case created && n < keyStreakLength:
		k.n.Add(1)
	case !created && n > 0:
		k.n.Store(-1)
	case !created && n > -keyStreakLength:
		k.n.Add(-1)
	}
}

// The columns every job and attempt query returns, in the order the scan
// functions read them. Both schemas name them alike.
const (
	jobCols = `id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
    attempt_count, result, completed_by, reason, created_at, updated_at, closed_at`

	attemptCols = `id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
    created_at, updated_at, finished_at`

	verificationCols = `id, provider, kind, contract_version, passed, reason, verified_at, expires_at`
)

// listLimit is q.Limit, or 100 for none.
func listLimit(q JobQuery) int {
	if q.Limit <= 0 {
		return 100
	}
	return q.Limit
}

// nullTime is t, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// dbTime scans a time stored as timestamptz (PostgreSQL) or as Unix
// microseconds (SQLite), or NULL.
type dbTime struct{ t *time.Time }

func (d dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case time.Time:
		*d.t = v.UTC()
	case int64:
		*d.t = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("jobs: cannot scan %T into a time", src)
	}
	return nil
}

func scanJob(sc scanner) (Job, error) { return scanJobAnd(sc) }

// scanJobAnd scans a job's columns followed by extra ones.
func scanJobAnd(sc scanner, extra ...any) (Job, error) {
	var j Job
	var completedBy sql.NullString
	var params, result []byte
	dest := []any{&j.ID, &j.Owner, &j.Key, &j.Kind, &j.Provider, &params, &j.Fingerprint, &j.State, &j.Version,
		&j.Attempts, &result, &completedBy, &j.Reason, dbTime{&j.CreatedAt}, dbTime{&j.UpdatedAt}, dbTime{&j.ClosedAt}}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return Job{}, err
	}
	j.Params = params
	if result != nil {
		j.Result = result
	}
	j.CompletedBy = completedBy.String
	j.readKey()
	return j, nil
}

func scanAttempt(sc scanner) (Attempt, error) {
	var a Attempt
	err := sc.Scan(attemptDest(&a)...)
	return a, err
}

func attemptDest(a *Attempt) []any {
	return []any{&a.ID, &a.JobID, &a.Seq, &a.Provider, &a.State, &a.BaseVersion, &a.Hedge, &a.ProviderRef, &a.Reason,
		dbTime{&a.CreatedAt}, dbTime{&a.UpdatedAt}, dbTime{&a.FinishedAt}}
}

func scanVerification(sc scanner) (Verification, error) {
	var v Verification
	err := sc.Scan(&v.ID, &v.Provider, &v.Kind, &v.ContractVersion, &v.Passed, &v.Reason,
		dbTime{&v.VerifiedAt}, dbTime{&v.ExpiresAt})
	return v, err
}

// scanValue scans a row of one column.
func scanValue[T any](sc scanner) (T, error) {
	var v T
	err := sc.Scan(&v)
	return v, err
}

func scanBlocker(sc scanner, jobID string) (*AttemptInFlightError, error) {
	b := &AttemptInFlightError{JobID: jobID}
	return b, sc.Scan(&b.AttemptID, &b.State)
}

// queryOne runs a query that returns at most one row and scans it. No row
// is notFound, or (nil) a zero T and no error.
func queryOne[T any](ctx context.Context, q DBTX, e errorMapper, op string, notFound error,
	scan func(scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(q.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		var zero T
		return zero, notFound
	}
	if err != nil {
		var zero T
		return zero, e.interpret(op, err)
	}
	return v, nil
}

// errRow is a row that failed: its Scan returns the error.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// queryAll runs query and scans every row.
func queryAll[T any](ctx context.Context, q DBTX, e errorMapper, op string,
	scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, e.interpret(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, e.interpret(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, e.interpret(op, err)
	}
	return out, nil
}

// rowsAffected runs a statement and reports how many rows it changed.
func rowsAffected(ctx context.Context, q DBTX, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func jobNotFound(id string) error     { return fmt.Errorf("jobs: job %s: %w", id, ErrNotFound) }
func attemptNotFound(id string) error { return fmt.Errorf("jobs: attempt %s: %w", id, ErrNotFound) }

var errNoJobForKey = fmt.Errorf("jobs: no job for this owner and key: %w", ErrNotFound)

// maxRetries bounds how often a write that was refused because of a
// concurrent change looks again before it gives up.
const maxRetries = 8

// errKeptChanging is the error of a write that was refused maxRetries
// times, each time for a cause that was gone when it looked.
func errKeptChanging(op string) error {
	return &StorageError{Op: op, Kind: StorageBusy, Message: "the rows kept changing under concurrent writes"}
}

// rowReader is what both SQL stores read when a guarded write was refused,
// to tell the caller why. Every read of one explanation sees one snapshot,
// taken after the refused statement ended (see the stores' explain): rows
// read by separate statements could each be of another moment, and an
// answer stitched from them (a job won by an attempt still open, say)
// would be of no state the store ever held.
type rowReader interface {
	jobForWrite(ctx context.Context, id string) (Job, error)
	attemptForWrite(ctx context.Context, id string) (Attempt, error)
	// blocker returns the job's open attempt that blocks a new attempt or
	// a FailJob (one in doubt first, then a running one), or nil.
	blocker(ctx context.Context, jobID string) (*AttemptInFlightError, error)
	// otherInDoubt returns another attempt of a's job that is starting or
	// unknown, or nil.
	otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error)
	// claimToken returns the token of the attempt's claim, "" if none.
	claimToken(ctx context.Context, attemptID string) (string, error)
}

// whyNoAttempt explains a refused CreateAttempt: the job is missing or
// closed, or an attempt blocks it. It returns nil when nothing blocks the
// job any more.
func whyNoAttempt(ctx context.Context, r rowReader, na NewAttempt) error {
	j, err := r.jobForWrite(ctx, na.JobID)
	if err != nil {
		return err
	}
	if j.State.Terminal() {
		return &JobClosedError{JobID: j.ID, State: j.State}
	}
	b, err := r.blocker(ctx, na.JobID)
	if err != nil || b == nil || (b.State == AttemptRunning && na.Hedge) {
		return err
	}
	return b
}

// whyNotClosed explains a refused CloseJob: the job is missing or already
// terminal, or, for FailJob, an attempt is still open. It returns nil when
// nothing stands in the way any more.
func whyNotClosed(ctx context.Context, r rowReader, c JobClose) error {
	cur, err := r.jobForWrite(ctx, c.ID)
	if err != nil {
		return err
	}
	if cur.State.Terminal() {
		return &JobClosedError{JobID: cur.ID, State: cur.State}
	}
	if c.To == JobFailed {
		if b, err := r.blocker(ctx, c.ID); err != nil || b != nil {
			if err != nil {
				return err
			}
			return b
		}
	}
	return nil
}

// whyNotUpdated explains a refused UpdateAttempt, with the attempt as it is
// now: a claim taken over, a state the move does not start from, a
// reference already recorded, or (inDoubt) another attempt in doubt. It
// returns a nil error when the cause has gone.
func whyNotUpdated(ctx context.Context, r rowReader, u AttemptUpdate, inDoubt bool) (Attempt, error) {
	cur, err := r.attemptForWrite(ctx, u.ID)
	if err != nil {
		return Attempt{}, err
	}
	if err := checkClaim(ctx, r, u.ID, u.ClaimToken); err != nil {
		return cur, err
	}
	if cur.State.Terminal() || !slices.Contains(u.From, cur.State) || (u.ProviderRef != "" && cur.ProviderRef != "") {
		return cur, &TransitionError{AttemptID: u.ID, From: cur.State, To: u.To}
	}
	if inDoubt {
		// Moving to unknown while another attempt of the job is in doubt
		// (a hedge still starting): at most one may be.
		b, err := r.otherInDoubt(ctx, cur)
		if err != nil {
			return Attempt{}, err
		}
		if b != nil {
			return cur, b
		}
	}
	return cur, nil
}

// whyNotCompleted reports a CompleteAttempt that changed nothing: the
// attempt was not open, or no longer claimed with the caller's token. It
// returns both rows as they are, with the error that says which.
func whyNotCompleted(ctx context.Context, r rowReader, c Completion) (Job, Attempt, error) {
	a, err := r.attemptForWrite(ctx, c.AttemptID)
	if err != nil {
		return Job{}, Attempt{}, err
	}
	j, err := r.jobForWrite(ctx, a.JobID)
	if err != nil {
		return Job{}, Attempt{}, err
	}
	if err := checkClaim(ctx, r, a.ID, c.ClaimToken); err != nil {
		return j, a, err
	}
	return j, a, &TransitionError{AttemptID: a.ID, From: a.State, To: AttemptSucceeded}
}

// completed turns the outcome of a compare-and-swap into CompleteAttempt's
// answer: nil for the winner, or the error that names why the attempt's
// result was dropped.
func completed(j Job, a Attempt) (Job, Attempt, error) {
	switch a.State {
	case AttemptLost:
		return j, a, &LostRaceError{JobID: j.ID, AttemptID: a.ID, WinnerID: j.CompletedBy}
	case AttemptCancelled:
		return j, a, &JobClosedError{JobID: j.ID, State: j.State}
	}
	return j, a, nil
}

// checkClaim returns an error matching ErrClaimLost unless token is empty
// or still the attempt's claim. Claims only ever pass to new tokens, so a
// token found gone stays gone.
func checkClaim(ctx context.Context, r rowReader, attemptID, token string) error {
	if token == "" {
		return nil
	}
	cur, err := r.claimToken(ctx, attemptID)
	if err != nil {
		return err
	}
	if cur != token {
		return fmt.Errorf("jobs: attempt %s: claim %s: %w", attemptID, token, ErrClaimLost)
	}
	return nil
}

// inCallerTx maps the error of a statement run in the caller's
// transaction: a conflict with a concurrent transaction, which the
// statement cannot wait out or retry inside a transaction the database
// has given up on, is StorageConflict, so that the caller runs its
// transaction again.
func inCallerTx(err error) error {
	var se *StorageError
	if errors.As(err, &se) && se.Kind == StorageBusy {
		conflict := *se
		conflict.Kind = StorageConflict
		return &conflict
	}
	return err
}

// fromStates pads an update's source states to three, with a state no
// attempt is ever in, for the three placeholders of the update statements.
func fromStates(from []AttemptState) (a, b, c string) {
	var s [3]string
	i := 0
	for _, st := range from {
		// A terminal attempt never changes again, whatever From lists.
		if st.Open() && i < len(s) && !slices.Contains(s[:i], string(st)) {
			s[i] = string(st)
			i++
		}
	}
	return s[0], s[1], s[2]
}

// stateArgs holds each attempt state boxed once as a statement's argument:
// a string converted to an interface allocates.
var stateArgs = func() map[string]any {
	m := map[string]any{}
	for _, st := range [...]AttemptState{AttemptStarting, AttemptRunning, AttemptUnknown, AttemptSucceeded,
		AttemptLost, AttemptFailed, AttemptCancelled} {
		m[string(st)] = string(st)
	}
	return m
}()

// stateArg returns st as a statement's argument, without an allocation
// when it is an attempt state (as the Store contract requires).
func stateArg(st string) any {
	if a, ok := stateArgs[st]; ok {
		return a
	}
	return st
}

// jobStates pads ReplaceJob's states to three, with a state no job is
// ever in, for the three placeholders of pgReplaceJob and sqliteRetireKey.
func jobStates(from []JobState) (a, b, c string) {
	var s [3]string
	for i := range s {
		if i < len(from) {
			s[i] = string(from[i])
		}
	}
	return s[0], s[1], s[2]
}

// endOfTime stands for "no bound" where a query compares claims with a time.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
