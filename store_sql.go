package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

// SQLStore is the Store for PostgreSQL and SQLite. Create one with
// OpenPostgres, NewPostgresStore, OpenSQLite or NewSQLiteStore. The dialects
// share this code path and differ only in their query text, their error
// mapping, and in that PostgreSQL does in one statement (with data-modifying
// common table expressions) what SQLite does in one immediate transaction.
type SQLStore struct {
	d     *dialect
	db    *sql.DB // writes, and reads on PostgreSQL
	rdb   *sql.DB // reads (a separate pool on SQLite files)
	owned []*sql.DB

	queue       *writeQueue         // SQLite files: writers wait here for their turn
	onWriteWait func(time.Duration) // see ObserveWriteWait

	listener closeListener // PostgreSQL: shared by the waiters of Manager.Wait
}

// dialect is everything that differs between the databases.
type dialect struct {
	name string

	// rebind turns a query written with $1, $2, … into the dialect's form.
	rebind func(string) string
	// ts converts a time for a query argument.
	ts func(time.Time) any
	// interpret maps a driver error to this package's errors.
	interpret func(op string, err error) error
	// retry reports whether err means the statement did not run and can be
	// run again (SQLite's busy).
	retry func(err error) bool

	// writeLock is true where one lock guards writes to the whole database
	// (SQLite), so that the wait for it is worth observing.
	writeLock bool

	// ctes is true where data-modifying CTEs make StartAttempt and Complete
	// one statement each.
	ctes bool

	beginMigrate string
	lockMigrate  string
	beginWrite   string // on SQLite: BEGIN IMMEDIATE

	createJob     string // returns jobCols + created; may return no row on a duplicate
	startAttempt  string // ctes only
	completeCAS   string // ctes only
	updateJobCAS  string // !ctes: the CAS step
	insertAttempt string // !ctes
	openJob       string // !ctes: guard + counter step of StartAttempt
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

const jobCols = `id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
    attempt_count, result, completed_by, reason, created_at, updated_at, closed_at`

const attemptCols = `id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
    created_at, updated_at, finished_at`

// Queries shared by both dialects, written with $n placeholders.
const (
	qJobByID  = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`
	qJobByKey = `SELECT ` + jobCols + ` FROM jobs WHERE owner = $1 AND idempotency_key = $2`

	qAttemptByID = `SELECT ` + attemptCols + ` FROM job_attempts WHERE id = $1`
	qAttempts    = `SELECT ` + attemptCols + ` FROM job_attempts WHERE job_id = $1 ORDER BY seq`
	qJobExists   = `SELECT 1 FROM jobs WHERE id = $1`
	qListJobs    = `SELECT ` + jobCols + ` FROM jobs WHERE id > $1 ORDER BY id LIMIT $2`

	// The blocking attempt, for error reports: in doubt first, then running.
	qBlocker = `SELECT id, state FROM job_attempts
    WHERE job_id = $1 AND state IN ('starting', 'unknown', 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	qOtherInDoubt = `SELECT id, state FROM job_attempts
    WHERE job_id = $1 AND id <> $2 AND state IN ('starting', 'unknown') LIMIT 1`

	// A provider reference ($3) is recorded only on an attempt that has
	// none: once recorded, it never changes.
	qUpdateAttempt = `UPDATE job_attempts SET
        state        = $2,
        provider_ref = CASE WHEN $3 = '' THEN provider_ref ELSE $3 END,
        reason       = CASE WHEN $4 = '' THEN reason ELSE $4 END,
        updated_at   = $5,
        finished_at  = CASE WHEN $6 THEN $5 ELSE finished_at END
    WHERE id = $1 AND state IN ($7, $8, $9) AND ($3 = '' OR provider_ref = '')
      AND ($10 = '' OR claim_token = $10)
    RETURNING ` + attemptCols

	// closeJob fails or cancels an open job. With $5 (fail) it also requires
	// that no attempt is open; comparing attempt_count with the statement's
	// snapshot makes a concurrent StartAttempt (which increments it under the
	// row lock) turn this into a no-op instead of a stale success.
	qCloseJob = `UPDATE jobs SET
        state      = $2,
        version    = version + 1,
        reason     = $3,
        updated_at = $4,
        closed_at  = $4
    WHERE id = $1 AND state IN ('pending', 'running')
      AND (NOT $5 OR (
            attempt_count = (SELECT s.attempt_count FROM jobs s WHERE s.id = $1)
            AND NOT EXISTS (SELECT 1 FROM job_attempts a
                            WHERE a.job_id = $1 AND a.state IN ('starting', 'running', 'unknown'))))
    RETURNING ` + jobCols

	// openJobGuard is the heart of StartAttempt: the job must be open, no
	// attempt may be in doubt (nor running, unless $4 allows a hedge), and
	// attempt_count must still be what the statement's snapshot saw. The
	// UPDATE takes the job's row lock; if a concurrent StartAttempt or
	// FailJob changed the row first, PostgreSQL re-evaluates this WHERE on
	// the new row, where the count no longer matches, and the statement does
	// nothing. The caller then looks again with a fresh snapshot.
	openJobGuard = `WHERE id = $1
      AND state IN ('pending', 'running')
      AND attempt_count = (SELECT s.attempt_count FROM jobs s WHERE s.id = $1)
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                      WHERE a.job_id = $1
                        AND (a.state IN ('starting', 'unknown') OR (a.state = 'running' AND NOT $4)))`
)

// maxRetries bounds how often an operation that lost a race with a
// concurrent change looks again before giving up.
const maxRetries = 8

func newSQLStore(d *dialect, db, rdb *sql.DB) *SQLStore {
	if rdb == nil {
		rdb = db
	}
	return &SQLStore{d: d, db: db, rdb: rdb}
}

// DB returns the database handle the store writes through.
func (s *SQLStore) DB() *sql.DB { return s.db }

// Dialect returns "postgres" or "sqlite".
func (s *SQLStore) Dialect() string { return s.d.name }

// Close closes the database handles the store opened itself. Handles passed
// in by the caller are left open.
func (s *SQLStore) Close() error {
	s.listener.close()
	var errs []error
	for _, db := range s.owned {
		errs = append(errs, db.Close())
	}
	return errors.Join(errs...)
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

func scanJob(sc scanner, extra ...any) (Job, error) {
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

// qualify prefixes each column of a column list with table.
func qualify(table, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = table + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// errUniqueKey and errUniqueInDoubt are what interpret returns for the two
// unique violations the store expects; they never leave the package.
var (
	errUniqueKey     = errors.New("unique violation: jobs (owner, idempotency_key)")
	errUniqueInDoubt = errors.New("unique violation: one attempt in doubt per job")
)

// withRetry runs fn, a write through the store's writer connection, in its
// turn in the write queue, and runs it again while the dialect says its
// error left nothing behind (SQLite's busy), until ctx ends.
func (s *SQLStore) withRetry(ctx context.Context, fn func() error) error {
	return s.write(ctx, func(locked func()) error {
		err := fn()
		if err == nil || s.d.retry == nil || !s.d.retry(err) {
			locked()
		}
		return err
	})
}

// write runs fn like withRetry. fn calls locked as soon as it holds the
// database's write lock, so that the wait can be observed. The turn is kept
// across retries: a writer that finds SQLite busy (a writer that does not
// queue, such as another program on the file) keeps its place.
func (s *SQLStore) write(ctx context.Context, fn func(locked func()) error) error {
	locked := func() {}
	if s.onWriteWait != nil {
		start := time.Now()
		observed := false
		locked = func() {
			if !observed {
				observed = true
				s.onWriteWait(time.Since(start))
			}
		}
	}
	if err := s.queue.lock(ctx); err != nil {
		return s.d.interpret("wait for the write lock", err)
	}
	defer s.queue.unlock()
	return retryWhile(ctx, s.d.retry, func() error { return fn(locked) })
}

// retryWhile runs fn until it succeeds, fails with an error that retry
// rejects (a nil retry rejects all), or ctx ends, pausing 1 to 3 ms between
// tries. The pause does not grow: a writer that waits is already in line
// (see writeQueue), and a longer sleep would only miss the moment the lock
// comes free.
func retryWhile(ctx context.Context, retry func(error) bool, fn func() error) error {
	for {
		err := fn()
		if err == nil || retry == nil || !retry(err) {
			return err
		}
		t := time.NewTimer(time.Millisecond + rand.N(2*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// inTx runs fn inside a write transaction: an immediate one on SQLite, so
// that the write lock is taken up front and busy waits happen at BEGIN, where
// they can be retried. The rollback runs even if ctx was cancelled.
func (s *SQLStore) inTx(ctx context.Context, op string, fn func(conn *sql.Conn) error) error {
	return s.write(ctx, func(locked func()) error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.d.interpret(op, err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, s.d.beginWrite); err != nil {
			return s.d.interpret(op, err)
		}
		locked()
		if err := fn(conn); err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return s.d.interpret(op, err)
		}
		return nil
	})
}

// CreateJob implements Store.
func (s *SQLStore) CreateJob(ctx context.Context, j Job) (Job, bool, error) {
	if !s.d.ctes {
		// SQLite: reads are cheap and concurrent, writes are serialised, so
		// look for a replay before taking the write lock.
		got, err := s.jobByKey(ctx, s.rdb, j.Owner, j.Key)
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Job{}, false, err
		}
	}
	return s.createJob(ctx, s.db, s.rdb, s.withRetry, j)
}

// CreateJobTx implements TxStore. It runs each statement once: one that
// failed inside the caller's transaction cannot succeed there by running it
// again. A deferred SQLite transaction that has read and must now write
// gets SQLITE_BUSY at once while another connection writes (no busy
// timeout is waited: the wait would block that writer or end on a stale
// snapshot), and SQLITE_BUSY_SNAPSHOT once that connection has committed;
// one that has not read gets SQLITE_BUSY after the busy timeout. SQLite
// asks for the transaction to be rolled back in every case. PostgreSQL
// aborts the transaction on a serialization failure or a deadlock. These
// busy errors are returned as a StorageError of kind StorageConflict.
func (s *SQLStore) CreateJobTx(ctx context.Context, tx DBTX, j Job) (Job, bool, error) {
	// Without the write queue: the caller's transaction holds SQLite's lock
	// already (or takes it by itself), and the next writer in the queue may
	// be waiting for the very connection it holds.
	once := func(_ context.Context, fn func() error) error { return fn() }
	got, created, err := s.createJob(ctx, tx, tx, once, j)
	var se *StorageError
	if errors.As(err, &se) && se.Kind == StorageBusy {
		conflict := *se
		conflict.Kind = StorageConflict
		return Job{}, false, &conflict
	}
	return got, created, err
}

// createJob inserts j through w, or reads the job already bound to its key
// through r; run runs the insert (in the write queue, again while SQLite is
// busy, or just once).
func (s *SQLStore) createJob(ctx context.Context, w, r DBTX, run func(context.Context, func() error) error, j Job) (Job, bool, error) {
	for range maxRetries {
		var got Job
		var created bool
		err := run(ctx, func() (err error) {
			got, err = scanJob(w.QueryRowContext(ctx, s.d.createJob,
				j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, s.d.ts(j.CreatedAt)), &created)
			return err
		})
		if err == nil {
			return got, created, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Job{}, false, s.d.interpret("create job", err)
		}
		// A duplicate whose row our statement could not see: it committed
		// after the statement began. A new statement sees it.
		got, err = s.jobByKey(ctx, r, j.Owner, j.Key)
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Job{}, false, err
		}
		// Deleted in between (retention): insert again.
	}
	return Job{}, false, &StorageError{Op: "create job", Kind: StorageBusy, Message: "key kept changing under concurrent writes"}
}

// Job implements Store.
func (s *SQLStore) Job(ctx context.Context, id string) (Job, error) {
	return s.jobByID(ctx, s.rdb, id)
}

func (s *SQLStore) jobByID(ctx context.Context, q DBTX, id string) (Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, s.d.rebind(qJobByID), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("jobs: job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, s.d.interpret("get job", err)
	}
	return j, nil
}

// JobByKey implements Store.
func (s *SQLStore) JobByKey(ctx context.Context, owner, key string) (Job, error) {
	return s.jobByKey(ctx, s.rdb, owner, key)
}

func (s *SQLStore) jobByKey(ctx context.Context, q DBTX, owner, key string) (Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, s.d.rebind(qJobByKey), owner, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("jobs: no job for this owner and key: %w", ErrNotFound)
	}
	if err != nil {
		return Job{}, s.d.interpret("get job by key", err)
	}
	return j, nil
}

// Attempt implements Store.
func (s *SQLStore) Attempt(ctx context.Context, id string) (Attempt, error) {
	return s.attemptByID(ctx, s.rdb, id)
}

func (s *SQLStore) attemptByID(ctx context.Context, q DBTX, id string) (Attempt, error) {
	a, err := scanAttempt(q.QueryRowContext(ctx, s.d.rebind(qAttemptByID), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, fmt.Errorf("jobs: attempt %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Attempt{}, s.d.interpret("get attempt", err)
	}
	return a, nil
}

// Attempts implements Store.
func (s *SQLStore) Attempts(ctx context.Context, jobID string) ([]Attempt, error) {
	out, err := queryAll(ctx, s, s.rdb, "list attempts", scanAttempt, qAttempts, jobID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	var one int
	err = s.rdb.QueryRowContext(ctx, s.d.rebind(qJobExists), jobID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("jobs: job %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return nil, s.d.interpret("list attempts", err)
	}
	return out, nil
}

// ListJobs implements Lister.
func (s *SQLStore) ListJobs(ctx context.Context, afterID string, limit int) ([]Job, error) {
	return queryAll(ctx, s, s.rdb, "list jobs", func(sc scanner) (Job, error) { return scanJob(sc) }, qListJobs, afterID, limit)
}

// queryAll runs query (written with $n placeholders) on q and scans every row.
func queryAll[T any](ctx context.Context, s *SQLStore, q DBTX, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, s.d.rebind(query), args...)
	if err != nil {
		return nil, s.d.interpret(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, s.d.interpret(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.interpret(op, err)
	}
	return out, nil
}

// CreateAttempt implements Store.
func (s *SQLStore) CreateAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	for range maxRetries {
		a, err := s.tryCreateAttempt(ctx, na)
		if err == nil {
			return a, nil
		}
		if !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, errUniqueInDoubt) {
			return Attempt{}, err
		}
		// Refused: find out why, with a fresh look.
		if err := s.whyNoAttempt(ctx, na); err != nil {
			return Attempt{}, err
		}
		// Whatever blocked it is gone: try again.
	}
	return Attempt{}, &StorageError{Op: "start attempt", Kind: StorageBusy, Message: "job kept changing under concurrent writes"}
}

func (s *SQLStore) tryCreateAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	at := s.d.ts(na.At)
	if s.d.ctes {
		a, err := scanAttempt(s.db.QueryRowContext(ctx, s.d.startAttempt, na.JobID, na.ID, na.Provider, na.Hedge, at))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Attempt{}, s.d.interpret("start attempt", err)
		}
		return a, err
	}
	var a Attempt
	err := s.inTx(ctx, "start attempt", func(conn *sql.Conn) error {
		var version int64
		var seq int
		var provider string
		err := conn.QueryRowContext(ctx, s.d.openJob, na.JobID, na.Provider, at, na.Hedge).Scan(&version, &seq, &provider)
		if err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return s.d.interpret("start attempt", err)
		}
		a, err = scanAttempt(conn.QueryRowContext(ctx, s.d.insertAttempt, na.ID, na.JobID, seq, provider, version, na.Hedge, at))
		if err != nil {
			return s.d.interpret("start attempt", err)
		}
		return nil
	})
	return a, err
}

// whyNoAttempt explains a refused StartAttempt. It returns nil when nothing
// blocks the job any more.
func (s *SQLStore) whyNoAttempt(ctx context.Context, na NewAttempt) error {
	j, err := s.jobByID(ctx, s.db, na.JobID)
	if err != nil {
		return err
	}
	if j.State.Terminal() {
		return &JobClosedError{JobID: j.ID, State: j.State}
	}
	b, err := s.blocker(ctx, "start attempt", na.JobID)
	if err != nil || b == nil || (b.State == AttemptRunning && na.Hedge) {
		return err
	}
	return b
}

// blocker returns the job's open attempt that blocks a new attempt or a
// FailJob (one in doubt first, then a running one), or nil if none is open.
func (s *SQLStore) blocker(ctx context.Context, op, jobID string) (*AttemptInFlightError, error) {
	b := &AttemptInFlightError{JobID: jobID}
	err := s.db.QueryRowContext(ctx, s.d.rebind(qBlocker), jobID).Scan(&b.AttemptID, &b.State)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.d.interpret(op, err)
	}
	return b, nil
}

// UpdateAttempt implements Store.
func (s *SQLStore) UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error) {
	var from [3]string
	for i := range from {
		// Pad with a state no attempt is ever in.
		if i < len(u.From) {
			from[i] = string(u.From[i])
		}
	}
	for range maxRetries {
		var a Attempt
		err := s.withRetry(ctx, func() (err error) {
			a, err = scanAttempt(s.db.QueryRowContext(ctx, s.d.rebind(qUpdateAttempt),
				u.ID, string(u.To), u.ProviderRef, u.Reason, s.d.ts(u.At), u.To.Terminal(), from[0], from[1], from[2], u.ClaimToken))
			return err
		})
		if err == nil {
			return a, nil
		}
		err = s.d.interpret("update attempt", err)
		inDoubt := errors.Is(err, errUniqueInDoubt)
		if !inDoubt && !errors.Is(err, sql.ErrNoRows) {
			return Attempt{}, err
		}
		// Refused: find out why, with a fresh look. Each look is a moment
		// later than the refusal, and the attempt, or the one that blocked
		// it, may have moved meanwhile.
		cur, err := s.attemptByID(ctx, s.db, u.ID)
		if err != nil {
			return Attempt{}, err
		}
		if err := s.checkClaim(ctx, s.db, u.ID, u.ClaimToken); err != nil {
			return cur, err
		}
		if !slices.Contains(u.From, cur.State) || (u.ProviderRef != "" && cur.ProviderRef != "") {
			return cur, &TransitionError{AttemptID: u.ID, From: cur.State, To: u.To}
		}
		if inDoubt {
			// Moving to unknown while another attempt of the job is in
			// doubt (a hedge still starting): at most one may be.
			b, err := s.otherInDoubt(ctx, cur)
			if err != nil {
				return Attempt{}, err
			}
			if b != nil {
				return cur, b
			}
		}
		// Whatever refused the update has moved on (the other attempt in
		// doubt was acknowledged, failed or cancelled): try again.
	}
	return Attempt{}, &StorageError{Op: "update attempt", Kind: StorageBusy, Message: "attempt kept changing under concurrent writes"}
}

// otherInDoubt returns another attempt of a's job that is starting or
// unknown, or nil if there is none.
func (s *SQLStore) otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error) {
	b := &AttemptInFlightError{JobID: a.JobID}
	err := s.db.QueryRowContext(ctx, s.d.rebind(qOtherInDoubt), a.JobID, a.ID).Scan(&b.AttemptID, &b.State)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.d.interpret("update attempt", err)
	}
	return b, nil
}

// CompleteAttempt implements Store.
func (s *SQLStore) CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error) {
	var j Job
	var a Attempt
	at := s.d.ts(c.At)
	var err error
	if s.d.ctes {
		err = s.withRetry(ctx, func() (err error) {
			j, err = scanJob(s.db.QueryRowContext(ctx, s.d.completeCAS, c.AttemptID, string(c.Result), at, c.ClaimToken), attemptDest(&a)...)
			return err
		})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			err = s.d.interpret("complete attempt", err)
		}
	} else {
		err = s.inTx(ctx, "complete attempt", func(conn *sql.Conn) error {
			cur, err := s.attemptByID(ctx, conn, c.AttemptID)
			if err != nil {
				return err
			}
			if !cur.State.Open() {
				return sql.ErrNoRows // reported below, as stored
			}
			// The claim is checked in the transaction, which holds the
			// write lock: no claim can change before the writes below.
			if err := s.checkClaim(ctx, conn, c.AttemptID, c.ClaimToken); errors.Is(err, ErrClaimLost) {
				return sql.ErrNoRows // reported below, as stored
			} else if err != nil {
				return err
			}
			state := AttemptSucceeded
			j, err = scanJob(conn.QueryRowContext(ctx, s.d.updateJobCAS, cur.JobID, cur.BaseVersion, string(c.Result), c.AttemptID, at))
			if errors.Is(err, sql.ErrNoRows) {
				if j, err = s.jobByID(ctx, conn, cur.JobID); err != nil {
					return err
				}
				state = AttemptCancelled
				if j.CompletedBy != "" {
					state = AttemptLost
				}
			} else if err != nil {
				return s.d.interpret("complete attempt", err)
			}
			a, err = scanAttempt(conn.QueryRowContext(ctx, s.d.rebind(qUpdateAttempt),
				c.AttemptID, string(state), "", loseReason(state, j), at, true, "starting", "running", "unknown", c.ClaimToken))
			return s.d.interpret("complete attempt", err)
		})
	}
	if errors.Is(err, sql.ErrNoRows) {
		// The attempt is not open (or does not exist): report it as stored.
		a, err := s.attemptByID(ctx, s.db, c.AttemptID)
		if err != nil {
			return Job{}, Attempt{}, err
		}
		j, err := s.jobByID(ctx, s.db, a.JobID)
		if err != nil {
			return Job{}, Attempt{}, err
		}
		if err := s.checkClaim(ctx, s.db, a.ID, c.ClaimToken); err != nil {
			return j, a, err
		}
		return j, a, &TransitionError{AttemptID: a.ID, From: a.State, To: AttemptSucceeded}
	}
	if err != nil {
		return Job{}, Attempt{}, err
	}
	switch a.State {
	case AttemptLost:
		return j, a, &LostRaceError{JobID: j.ID, AttemptID: c.AttemptID, WinnerID: j.CompletedBy}
	case AttemptCancelled:
		return j, a, &JobClosedError{JobID: j.ID, State: j.State}
	}
	return j, a, nil
}

// loseReason is the reason recorded on an attempt that finished without winning.
func loseReason(state AttemptState, j Job) string {
	switch state {
	case AttemptLost:
		return "result dropped: attempt " + j.CompletedBy + " completed the job first"
	case AttemptCancelled:
		return "result dropped: job " + string(j.State)
	}
	return ""
}

// CloseJob implements Store.
func (s *SQLStore) CloseJob(ctx context.Context, c JobClose) (Job, error) {
	requireIdle := c.To == JobFailed
	for range maxRetries {
		var j Job
		err := s.withRetry(ctx, func() (err error) {
			j, err = scanJob(s.db.QueryRowContext(ctx, s.d.rebind(qCloseJob), c.ID, string(c.To), c.Reason, s.d.ts(c.At), requireIdle))
			return err
		})
		if err == nil {
			return j, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return Job{}, s.d.interpret("close job", err)
		}
		cur, err := s.jobByID(ctx, s.db, c.ID)
		if err != nil {
			return Job{}, err
		}
		if cur.State.Terminal() {
			return Job{}, &JobClosedError{JobID: cur.ID, State: cur.State}
		}
		if requireIdle {
			b, err := s.blocker(ctx, "close job", c.ID)
			if err != nil {
				return Job{}, err
			}
			if b != nil {
				return Job{}, b
			}
		}
	}
	return Job{}, &StorageError{Op: "close job", Kind: StorageBusy, Message: "job kept changing under concurrent writes"}
}

func nowText() string { return time.Now().UTC().Format(time.RFC3339Nano) }
