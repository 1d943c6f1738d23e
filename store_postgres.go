package jobs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
)

// PostgresStore is the Store on PostgreSQL, through pgx's database/sql
// driver. Every write is one statement: Submit an INSERT … ON CONFLICT that
// also returns an existing row, StartAttempt a guarded update of the job
// joined to the attempt's insert, Complete the compare-and-swap of cas.go.
// Concurrent writers, in this process or others, are ordered by row locks,
// and every guard is re-checked by PostgreSQL on the row it finally locks.
// Manager.Wait is woken by LISTEN/NOTIFY (see NotifyClosed).
//
// This file holds everything the store does: opening, settings, every
// statement, error mapping, purge and the listening connection.
type PostgresStore struct {
	sqlHandles
	listener closeListener // shared by the waiters of Manager.Wait
	keys     keyStreak     // CreateJob's recent keys: new ones in a row
}

// OpenPostgres connects to PostgreSQL through pgx's database/sql driver and
// applies the schema (see Migrations). dsn is a pgx connection string, e.g.
// "postgres://app@db:5432/app?sslmode=disable"; add search_path=NAME to keep
// the tables in their own schema. Close the store to close the connection
// pool.
func OpenPostgres(ctx context.Context, dsn string, opts ...StoreOption) (*PostgresStore, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, &StorageError{Op: "open postgres", Kind: StorageUnavailable, Message: err.Error()}
	}
	s, err := NewPostgresStore(ctx, db, opts...)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = append(s.owned, db)
	return s, nil
}

// NewPostgresStore returns a store over the caller's PostgreSQL database,
// opened with the "pgx" driver (sql.Open("pgx", dsn), or
// stdlib.OpenDBFromPool to share a pgxpool with the application), and
// applies the schema. The caller keeps ownership of db.
func NewPostgresStore(ctx context.Context, db *sql.DB, opts ...StoreOption) (*PostgresStore, error) {
	cfg := readOptions(opts)
	s := &PostgresStore{sqlHandles: sqlHandles{db: db, rdb: db}}
	if cfg.listenDSN != nil {
		if *cfg.listenDSN == "" {
			return nil, invalid("ListenDSN", "empty")
		}
		lc, err := pgx.ParseConfig(*cfg.listenDSN)
		if err != nil {
			return nil, invalid("ListenDSN", "%v", err)
		}
		s.listener.config = lc
	}
	if err := checkSchema(ctx, s, cfg, s.migrate); err != nil {
		return nil, err
	}
	return s, nil
}

// NewPostgresStoreSQLX is NewPostgresStore for an *sqlx.DB.
func NewPostgresStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...StoreOption) (*PostgresStore, error) {
	return NewPostgresStore(ctx, db.DB, opts...)
}

// Dialect returns "postgres".
func (s *PostgresStore) Dialect() string { return "postgres" }

// Close stops the listening connection and closes the database handles the
// store opened itself. Handles passed in by the caller are left open.
func (s *PostgresStore) Close() error {
	s.listener.close()
	return s.closeOwned()
}

// migrate applies the schema in one transaction under an advisory lock,
// one per schema, so that tests in separate schemas do not wait for each
// other.
func (s *PostgresStore) migrate(ctx context.Context) error {
	return migrate(ctx, s.db, s, migrationPlan{
		dialect: "postgres",
		begin:   "BEGIN",
		lock:    `SELECT pg_advisory_xact_lock(hashtext('jobs.migrate.' || current_schema()))`,
	})
}

// DatabaseSchemaVersion implements SQLStore.
func (s *PostgresStore) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.db, s)
}

// AppliedMigrations implements SQLStore.
func (s *PostgresStore) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	return appliedMigrations(ctx, s.db, s)
}

// pgJobColsOfJobs is jobCols qualified by the table, for statements that
// join jobs with another table.
const pgJobColsOfJobs = `jobs.id, jobs.owner, jobs.idempotency_key, jobs.kind, jobs.provider, jobs.params,
    jobs.fingerprint, jobs.state, jobs.version, jobs.attempt_count, jobs.result, jobs.completed_by, jobs.reason,
    jobs.created_at, jobs.updated_at, jobs.closed_at`

// The statements, in the order of the methods below.
const (
	// Submit in one round trip: insert, or return the existing row. A
	// duplicate inserted by a transaction that committed after this
	// statement began is invisible to its snapshot; then no row comes back,
	// and createJob reads it with a new statement.
	//
	// A new job is the row as sent: its columns come back as constants
	// that cost nothing to scan, and only created (true) tells.
	pgCreateJob = `WITH ins AS (
    INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT '', '', '', '', '', NULL::json, '', '', 0::bigint, 0, NULL::json, NULL::text, '',
       NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, true FROM ins
UNION ALL
SELECT ` + jobCols + `, false FROM jobs
 WHERE owner = $2 AND idempotency_key = $3 AND NOT EXISTS (SELECT 1 FROM ins)`

	// Submit of a key that is probably new (keyStreak): the insert alone,
	// cheaper than pgCreateJob's common table expression. No row: the key
	// is taken, and pgCreateJob follows.
	pgInsertJob = `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING true`

	pgJobByID   = `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`
	pgJobByKey  = `SELECT ` + jobCols + ` FROM jobs WHERE owner = $1 AND idempotency_key = $2`
	pgJobExists = `SELECT 1 FROM jobs WHERE id = $1`

	// CloseJob fails or cancels an open job. With $5 (fail) it also
	// requires that no attempt is open; comparing attempt_count with the
	// statement's snapshot makes a concurrent StartAttempt (which increments
	// it under the row lock) turn this into a no-op instead of a stale
	// success: PostgreSQL re-evaluates the WHERE on the row it locks.
	pgCloseJob = `UPDATE jobs SET
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

	pgAttemptByID = `SELECT ` + attemptCols + ` FROM job_attempts WHERE id = $1`
	pgAttempts    = `SELECT ` + attemptCols + ` FROM job_attempts WHERE job_id = $1 ORDER BY seq`

	// StartAttempt in one statement. The UPDATE of the job is the guard:
	// the job must be open, no attempt may be in doubt (nor running, unless
	// $4 allows a hedge), and attempt_count must still be what the
	// statement's snapshot saw. It takes the job's row lock; if a concurrent
	// StartAttempt or FailJob changed the row first, PostgreSQL re-evaluates
	// the WHERE on the new row, where the count no longer matches, and the
	// statement does nothing (the caller looks again). The attempt is
	// inserted with the job's version and the new count as its Seq. The
	// unique index on attempts in doubt backs the guard up. It returns
	// only the columns the caller does not know.
	pgCreateAttempt = `WITH j AS (
    UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $5
     WHERE id = $1
       AND state IN ('pending', 'running')
       AND attempt_count = (SELECT s.attempt_count FROM jobs s WHERE s.id = $1)
       AND NOT EXISTS (SELECT 1 FROM job_attempts a
                        WHERE a.job_id = $1
                          AND (a.state IN ('starting', 'unknown') OR (a.state = 'running' AND NOT $4)))
    RETURNING id, version, attempt_count, provider
)
INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
SELECT $2, j.id, j.attempt_count, COALESCE(NULLIF($3, ''), j.provider), 'starting', j.version, $4, $5, $5 FROM j
RETURNING seq, provider, base_version`

	// The open attempt that blocks a new attempt or a FailJob, for error
	// reports: one in doubt first, then a running one.
	pgBlocker = `SELECT id, state FROM job_attempts
    WHERE job_id = $1 AND state IN ('starting', 'unknown', 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	pgOtherInDoubt = `SELECT id, state FROM job_attempts
    WHERE job_id = $1 AND id <> $2 AND state IN ('starting', 'unknown') LIMIT 1`

	// UpdateAttempt: a move from one of $7, $8, $9. A provider reference
	// ($3) is recorded only on an attempt that has none: once recorded, it
	// never changes. A reconciler's write ($10) applies only under its
	// claim. Moving to unknown beside another attempt in doubt violates
	// the unique index job_attempts_one_in_doubt. It returns the columns
	// the caller does not know: not the ID, the state, nor the times it
	// sets (finished_at is set exactly in a terminal state).
	pgUpdateAttempt = `UPDATE job_attempts SET
        state        = $2,
        provider_ref = CASE WHEN $3 = '' THEN provider_ref ELSE $3 END,
        reason       = CASE WHEN $4 = '' THEN reason ELSE $4 END,
        updated_at   = $5,
        finished_at  = CASE WHEN $6 THEN $5 ELSE finished_at END
    WHERE id = $1 AND state IN ($7, $8, $9) AND ($3 = '' OR provider_ref = '')
      AND ($10 = '' OR claim_token = $10)
    RETURNING job_id, seq, provider, base_version, hedge, provider_ref, reason, created_at`

	// Stale attempts, served by job_attempts_stale_idx (updated_at,
	// claimed_until; partial on open states).
	pgStaleAttempts = `SELECT ` + attemptCols + ` FROM job_attempts
    WHERE state IN ('starting', 'running', 'unknown')
      AND updated_at < $3
      AND ((state = 'unknown' AND updated_at < $1) OR (state <> 'unknown' AND updated_at < $2))
      AND (claimed_until IS NULL OR claimed_until <= $5)
    ORDER BY updated_at, id
    LIMIT $4`

	// A claim is taken on an attempt still as the reconciler read it, and
	// not claimed by anyone else. PostgreSQL re-evaluates the WHERE on a
	// row that a concurrent claim changed first, so that of racing claims
	// exactly one changes the row.
	pgClaimAttempt = `UPDATE job_attempts SET claim_token = $4, claimed_until = $6
    WHERE id = $1 AND state = $2 AND updated_at = $3
      AND (claimed_until IS NULL OR claimed_until <= $5)
    RETURNING ` + attemptCols

	pgRenewClaim = `UPDATE job_attempts SET claimed_until = $3 WHERE id = $1 AND claim_token = $2`
	pgClaimToken = `SELECT claim_token FROM job_attempts WHERE id = $1`

	pgRecordVerification = `INSERT INTO job_verifications (` + verificationCols + `)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	// Served by job_verifications_lookup_idx when provider, kind and
	// contract version are given, as CheckFailover gives them.
	pgVerifications = `SELECT ` + verificationCols + ` FROM job_verifications
    WHERE ($1 = '' OR provider = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR contract_version = $3)
    ORDER BY verified_at DESC, id DESC LIMIT $4`

	// A job is purgeable when it is terminal (closed_at is set exactly
	// then), closed before $1, and has no open attempt. Candidates are
	// read through jobs_created_at_idx, oldest first: a job closed before
	// $1 was created before it, and an index on closed_at, which every
	// close sets, would keep closes from being HOT updates (see
	// 0005_hot_closes.sql).
	pgPurgeable = `created_at < $1 AND closed_at < $1
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                      WHERE a.job_id = jobs.id AND a.state IN ('starting', 'running', 'unknown'))`

	pgCountPurgeable = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM jobs WHERE ` + pgPurgeable

	// One statement deletes a batch, and never waits for a lock: victims
	// takes the jobs' row locks with SKIP LOCKED, att the attempts' the same
	// way, and only jobs whose every attempt could be locked (ok) are
	// deleted. Complete locks an attempt and then its job, the opposite
	// order; waiting for an attempt here would deadlock with a retried
	// Complete. A terminal job accepts no new attempt, and a terminal
	// attempt never reopens, so what victims saw stays true. The attempts
	// are deleted explicitly, rather than by the foreign key's cascade, so
	// that they are counted; so are the rows that waiters of processes of
	// schema version 4 left in jobs_waiters.
	pgPurge = `WITH victims AS (
    SELECT id, attempt_count FROM jobs WHERE ` + pgPurgeable + `
     ORDER BY created_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), att AS (
    SELECT id, job_id FROM job_attempts WHERE job_id IN (SELECT id FROM victims)
       FOR UPDATE SKIP LOCKED
), ok AS (
    SELECT v.id FROM victims v
     WHERE v.attempt_count = (SELECT COUNT(*) FROM att WHERE att.job_id = v.id)
), da AS (
    DELETE FROM job_attempts WHERE id IN (SELECT att.id FROM att JOIN ok ON ok.id = att.job_id) RETURNING 1
), dw AS (
    DELETE FROM jobs_waiters WHERE job_id IN (SELECT id FROM ok)
), dj AS (
    DELETE FROM jobs WHERE id IN (SELECT id FROM ok) RETURNING 1
)
SELECT (SELECT COUNT(*) FROM dj), (SELECT COUNT(*) FROM da)`
)

// CreateJob implements Store: one statement, pgCreateJob, that inserts the
// job or returns the one holding its key, unless the keys of late make
// another cheaper (keyStreak). After a streak of new keys it tries the
// plain insert first, after a streak of taken keys (retries, storms) the
// read of the key; either falls through to pgCreateJob when it misses.
func (s *PostgresStore) CreateJob(ctx context.Context, j Job) (Job, bool, error) {
	h := pgHandle{pool: s.db}
	switch {
	case s.keys.newKeys():
		var inserted bool
		err := pgQueryRow(ctx, h, pgInsertJob,
			j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt).Scan(&inserted)
		switch {
		case err == nil:
			return j, true, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("create job", err)
		}
	case s.keys.takenKeys():
		got, err := pgReadJobByKey(ctx, h, j.Owner, j.Key)
		switch {
		case err == nil:
			s.keys.record(false)
			return got, false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("get job by key", err)
		}
	}
	got, created, err := s.createJob(ctx, h, j)
	if err == nil {
		s.keys.record(created)
	}
	return got, created, err
}

// CreateJobTx implements Store. It runs each statement once: PostgreSQL
// aborts the caller's transaction on a serialization failure or a
// deadlock, which are returned as a StorageError of kind StorageConflict.
func (s *PostgresStore) CreateJobTx(ctx context.Context, tx DBTX, j Job) (Job, bool, error) {
	got, created, err := s.createJob(ctx, pgHandle{db: tx}, j)
	return got, created, inCallerTx(err)
}

// PgxTxStore is implemented by stores that can create a job inside a
// transaction that the caller began with pgx (a pgx.Tx from a *pgx.Conn or
// a pgxpool.Pool), for Manager.SubmitPgxTx. PostgresStore implements it.
// It is optional: SubmitPgxTx on a store without it returns an error
// matching errors.ErrUnsupported.
type PgxTxStore interface {
	// CreateJobPgxTx is Store.CreateJobTx inside tx, a pgx transaction on
	// the store's database, with the same contract.
	CreateJobPgxTx(ctx context.Context, tx pgx.Tx, j Job) (job Job, created bool, err error)
}

// SubmitPgxTx is SubmitTx inside a transaction that the caller began with
// pgx (a pgx.Tx from a *pgx.Conn, or from a pgxpool.Pool), for
// applications that use pgx rather than database/sql. It behaves as
// SubmitTx: the job exists only if tx commits, and a conflict that tx
// cannot survive is a *StorageError of kind StorageConflict.
//
// The store must be a PostgresStore on the same database; to share one
// pool between the application and the store, open the store over
// stdlib.OpenDBFromPool(pool). Other stores return an error matching
// errors.ErrUnsupported, and a nil tx is ErrInvalidInput; neither writes
// anything. As in SubmitTx, a req.Reuse other than KeyReuseNever is
// ErrInvalidInput.
//
// SubmitTx cannot take a pgx.Tx: it has none of the methods of *sql.Tx
// that SubmitTx uses, and database/sql's rows cannot be made from pgx's.
func (m *Manager) SubmitPgxTx(ctx context.Context, tx pgx.Tx, req SubmitRequest) (Job, bool, error) {
	s, ok := m.store.(PgxTxStore)
	if !ok {
		return Job{}, false, fmt.Errorf("jobs: SubmitPgxTx on a %T, which cannot write in a pgx transaction: %w", m.store, errors.ErrUnsupported)
	}
	if tx == nil {
		return Job{}, false, invalid("tx", "nil")
	}
	if err := reuseInTx(req); err != nil {
		return Job{}, false, err
	}
	return m.submit(ctx, req, func(ctx context.Context, j Job) (Job, bool, error) {
		return s.CreateJobPgxTx(ctx, tx, j)
	})
}

// CreateJobPgxTx implements PgxTxStore: CreateJobTx in a pgx transaction,
// with the same statements.
func (s *PostgresStore) CreateJobPgxTx(ctx context.Context, tx pgx.Tx, j Job) (Job, bool, error) {
	got, created, err := s.createJob(ctx, pgHandle{tx: tx}, j)
	return got, created, inCallerTx(err)
}

// createJob inserts j, or reads the job that holds its key. A new job is
// j as sent: the statement returns only that it inserted it.
func (s *PostgresStore) createJob(ctx context.Context, h pgHandle, j Job) (Job, bool, error) {
	for range maxRetries {
		var got struct {
			pgJob
			created bool
			d       [17]any
		}
		err := pgQueryRow(ctx, h, pgCreateJob,
			j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt).Scan(append(got.dest(got.d[:0]), &got.created)...)
		created := got.created
		switch {
		case err == nil && created:
			return j, true, nil
		case err == nil:
			return got.job(), false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("create job", err)
		}
		// A duplicate whose row the statement could not see: it committed
		// after the statement began. A new statement sees it.
		if found, err := pgReadJobByKey(ctx, h, j.Owner, j.Key); !errors.Is(err, sql.ErrNoRows) {
			return found, false, s.interpret("get job by key", err)
		}
		// Deleted in between (retention): insert again.
	}
	return Job{}, false, errKeptChanging("create job")
}

// pgHandle is where createJob runs its statements: the store's pool, a
// database/sql handle or transaction of the caller's (db), or a pgx
// transaction (tx), whichever is set.
type pgHandle struct {
	pool *sql.DB
	db   DBTX
	tx   pgx.Tx
}

// pgQueryRow runs a query that returns at most one row through h. A pgx
// row that is not there fails its Scan with pgx.ErrNoRows, which matches
// sql.ErrNoRows.
func pgQueryRow(ctx context.Context, h pgHandle, query string, args ...any) scanner {
	switch {
	case h.tx != nil:
		return h.tx.QueryRow(ctx, query, args...)
	case h.pool != nil:
		return scanFunc(func(dest ...any) error { return pgxQueryRow(ctx, h.pool, query, args, dest...) })
	}
	return h.db.QueryRowContext(ctx, query, args...)
}

// scanFunc is a scanner made of a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// pgxQueryRow runs a query that returns at most one row through pgx
// itself, on a connection of db, a pool of its "pgx" driver, rather than
// through database/sql, and scans the row into dest: pgx scans into the
// destinations directly, where database/sql first builds a decoder per
// column per query and a value per column. On a pool of another driver (a
// wrapper) it runs through database/sql.
func pgxQueryRow(ctx context.Context, db *sql.DB, query string, args []any, dest ...any) error {
	return pgxOn(ctx, db, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, query, args...).Scan(dest...)
	}, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, query, args...).Scan(dest...)
	})
}

// pgxOn runs native on a connection of db through pgx itself or, on a pool
// of another driver (a wrapper), fallback through database/sql. A
// connection that pgconn finds closed before anything was sent on it (the
// server went away while it sat in the pool) is replaced, up to twice, as
// database/sql replaces one for its own calls; one that native leaves
// closed is handed back as bad, for the pool to drop.
func pgxOn(ctx context.Context, db *sql.DB, native func(*pgx.Conn) error, fallback func(*sql.Conn) error) error {
	for try := 1; ; try++ {
		err := pgxOnce(ctx, db, native, fallback)
		if try == 3 || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			return err
		}
	}
}

// pgxOnce is one try of pgxOn, on one connection.
func pgxOnce(ctx context.Context, db *sql.DB, native func(*pgx.Conn) error, fallback func(*sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	isPgx := false
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return nil
		}
		isPgx = true
		err := native(c.Conn())
		if err != nil && c.Conn().IsClosed() {
			err = badConn{err}
		}
		return err
	})
	if isPgx {
		return err
	}
	return fallback(conn)
}

// pgReadJobByKey reads the job that holds owner's key through h. No such
// job is sql.ErrNoRows (pgx's ErrNoRows matches it).
func pgReadJobByKey(ctx context.Context, h pgHandle, owner, key string) (Job, error) {
	var got struct {
		pgJob
		d [16]any
	}
	if err := pgQueryRow(ctx, h, pgJobByKey, owner, key).Scan(got.dest(got.d[:0])...); err != nil {
		return Job{}, err
	}
	return got.job(), nil
}

// pgJob receives the columns of a job (jobCols) in types that both pgx
// and database/sql scan into without converting through a value of their
// own.
type pgJob struct {
	j                         Job
	params, result            []byte
	state                     string
	attempts                  int32
	completedBy               pgtype.Text
	created, updated, closed_ pgtype.Timestamptz
}

// dest appends the destinations of the job's columns to d.
func (p *pgJob) dest(d []any) []any {
	return append(d, &p.j.ID, &p.j.Owner, &p.j.Key, &p.j.Kind, &p.j.Provider, &p.params, &p.j.Fingerprint,
		pgState{&p.state}, &p.j.Version, &p.attempts, &p.result, &p.completedBy, &p.j.Reason,
		&p.created, &p.updated, &p.closed_)
}

// job returns the job scanned.
func (p *pgJob) job() Job {
	j := p.j
	j.Params = p.params
	if p.result != nil {
		j.Result = p.result
	}
	j.State = JobState(p.state)
	j.Attempts = int(p.attempts)
	j.CompletedBy = p.completedBy.String
	j.CreatedAt, j.UpdatedAt, j.ClosedAt = pgTime(p.created), pgTime(p.updated), pgTime(p.closed_)
	return j
}

// pgText is a text argument that pgx encodes without a copy of the string
// in an interface value of its own: a pointer fits in one as it is.
type pgText struct{ s *string }

// TextValue implements pgtype.TextValuer, for pgx.
func (t pgText) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *t.s, Valid: true}, nil }

// Value implements driver.Valuer, for database/sql.
func (t pgText) Value() (driver.Value, error) { return *t.s, nil }

// pgKnown scans a text column into *s, through pgx (as a BytesScanner) or
// database/sql (a Scanner), without an allocation when it holds known.
type pgKnown struct {
	s     *string
	known string
}

func (p *pgKnown) ScanBytes(b []byte) error {
	if string(b) == p.known {
		*p.s = p.known
	} else {
		*p.s = string(b)
	}
	return nil
}

func (p *pgKnown) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*p.s = v
	case []byte:
		return p.ScanBytes(v)
	default:
		return fmt.Errorf("jobs: cannot scan %T into a string", src)
	}
	return nil
}

// pgState scans a state column into *s: a known state without an
// allocation, through pgx (as a BytesScanner) or database/sql (a Scanner).
type pgState struct{ s *string }

func (p pgState) ScanBytes(b []byte) error {
	*p.s = knownState(b)
	return nil
}

func (p pgState) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*p.s = v
	case []byte:
		*p.s = knownState(v)
	default:
		return fmt.Errorf("jobs: cannot scan %T into a state", src)
	}
	return nil
}

// knownState returns b as a string, the constant of a job's or an
// attempt's state when it is one.
func knownState(b []byte) string {
	for _, s := range [...]string{
		string(JobPending), string(JobRunning), string(JobSucceeded), string(JobFailed), string(JobCancelled),
		string(AttemptStarting), string(AttemptUnknown), string(AttemptLost),
	} {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// pgTime is t in UTC, or the zero time for NULL.
func pgTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// Job implements Store.
func (s *PostgresStore) Job(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, s.db, s, "get job", jobNotFound(id), scanJob, pgJobByID, id)
}

// JobByKey implements Store.
func (s *PostgresStore) JobByKey(ctx context.Context, owner, key string) (Job, error) {
	return queryOne(ctx, s.db, s, "get job by key", errNoJobForKey, scanJob, pgJobByKey, owner, key)
}

// ListJobs implements JobLister.
func (s *PostgresStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query := pgListJobs
	if q.Newest {
		query = pgListJobsNewest
	}
	states := make([]string, len(q.States))
	for i, st := range q.States {
		states[i] = string(st)
	}
	return queryAll(ctx, s.db, s, "list jobs", func(sc scanner) (Job, error) { return scanJob(sc) }, query,
		q.Owner, states, q.Kind, q.Provider, nullTime(q.CreatedAfter), nullTime(q.CreatedBefore), q.After, listLimit(q))
}

// pgListJobs and pgListJobsNewest are ListJobs, oldest or newest first:
// each predicate holds when its parameter is empty (” or NULL, or no
// states), so that one constant statement serves every query.
const (
	pgListJobsWhere = ` FROM jobs
    WHERE ($1 = '' OR owner = $1)
      AND (cardinality($2::text[]) = 0 OR state = ANY ($2::text[]))
      AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR provider = $4)
      AND ($5::timestamptz IS NULL OR created_at >= $5)
      AND ($6::timestamptz IS NULL OR created_at < $6)`
	pgListJobs       = `SELECT ` + jobCols + pgListJobsWhere + ` AND ($7 = '' OR id > $7) ORDER BY id LIMIT $8`
	pgListJobsNewest = `SELECT ` + jobCols + pgListJobsWhere + ` AND ($7 = '' OR id < $7) ORDER BY id DESC LIMIT $8`
)

// CloseJob implements Store.
func (s *PostgresStore) CloseJob(ctx context.Context, c JobClose) (Job, error) {
	if err := c.Check(); err != nil {
		return Job{}, err
	}
	for range maxRetries {
		j, err := scanJob(s.db.QueryRowContext(ctx, pgCloseJob, c.ID, string(c.To), c.Reason, c.At, c.To == JobFailed))
		if !errors.Is(err, sql.ErrNoRows) {
			return j, s.interpret("close job", err)
		}
		if err := whyNotClosed(ctx, s, c); err != nil {
			return Job{}, err
		}
	}
	return Job{}, errKeptChanging("close job")
}

// Attempt implements Store.
func (s *PostgresStore) Attempt(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, s.db, s, "get attempt", attemptNotFound(id), scanAttempt, pgAttemptByID, id)
}

// Attempts implements Store.
func (s *PostgresStore) Attempts(ctx context.Context, jobID string) ([]Attempt, error) {
	out, err := queryAll(ctx, s.db, s, "list attempts", scanAttempt, pgAttempts, jobID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	// No attempt: is there a job?
	_, err = queryOne(ctx, s.db, s, "list attempts", jobNotFound(jobID), scanValue[int], pgJobExists, jobID)
	return out, err
}

// CreateAttempt implements Store.
func (s *PostgresStore) CreateAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	// The arguments point into r, which the destinations are in already.
	var r struct {
		jobID, id, provider string
		at                  pgtype.Timestamptz // pgx's own type, encoded without a wrapper
		seq                 int32
		got                 string
		known               pgKnown
		base                int64
		dest                [3]any
		args                [5]any
	}
	r.jobID, r.id, r.provider = na.JobID, na.ID, na.Provider
	r.at = pgtype.Timestamptz{Time: na.At, Valid: true}
	r.known = pgKnown{&r.got, na.Provider}
	d := append(r.dest[:0], &r.seq, &r.known, &r.base)
	args := append(r.args[:0], pgText{&r.jobID}, pgText{&r.id}, pgText{&r.provider}, na.Hedge, &r.at)
	for range maxRetries {
		err := s.interpret("start attempt", pgxQueryRow(ctx, s.db, pgCreateAttempt, args, d...))
		if err == nil {
			stored := na.At.UTC().Truncate(time.Microsecond) // as stored: pgx sends whole microseconds
			return Attempt{ID: na.ID, JobID: na.JobID, Seq: int(r.seq), Provider: r.got, State: AttemptStarting,
				BaseVersion: r.base, Hedge: na.Hedge, CreatedAt: stored, UpdatedAt: stored}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, errUniqueInDoubt) {
			return Attempt{}, err
		}
		if err := whyNoAttempt(ctx, s, na); err != nil {
			return Attempt{}, err
		}
	}
	return Attempt{}, errKeptChanging("start attempt")
}

// UpdateAttempt implements Store.
func (s *PostgresStore) UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error) {
	if err := u.Check(); err != nil {
		return Attempt{}, err
	}
	// As in CreateAttempt, the arguments point into r.
	var r struct {
		u       AttemptUpdate
		at      pgtype.Timestamptz
		a       Attempt
		seq     int32
		known   pgKnown
		created pgtype.Timestamptz
		dest    [8]any
		args    [10]any
	}
	r.u, r.at = u, pgtype.Timestamptz{Time: u.At, Valid: true}
	r.known = pgKnown{&r.a.ProviderRef, u.ProviderRef}
	d := append(r.dest[:0], &r.a.JobID, &r.seq, &r.a.Provider, &r.a.BaseVersion, &r.a.Hedge,
		&r.known, &r.a.Reason, &r.created)
	from1, from2, from3 := fromStates(u.From)
	args := append(r.args[:0], pgText{&r.u.ID}, stateArg(string(u.To)), pgText{&r.u.ProviderRef}, pgText{&r.u.Reason},
		&r.at, u.To.Terminal(), stateArg(from1), stateArg(from2), stateArg(from3), pgText{&r.u.ClaimToken})
	for range maxRetries {
		err := s.interpret("update attempt", pgxQueryRow(ctx, s.db, pgUpdateAttempt, args, d...))
		if err == nil {
			a := r.a
			a.ID, a.State, a.Seq, a.CreatedAt = u.ID, u.To, int(r.seq), pgTime(r.created)
			a.UpdatedAt = u.At.UTC().Truncate(time.Microsecond) // as stored: pgx sends whole microseconds
			if u.To.Terminal() {
				a.FinishedAt = a.UpdatedAt
			}
			return a, nil
		}
		inDoubt := errors.Is(err, errUniqueInDoubt)
		if !inDoubt && !errors.Is(err, sql.ErrNoRows) {
			return Attempt{}, err
		}
		if cur, err := whyNotUpdated(ctx, s, u, inDoubt); err != nil {
			return cur, err
		}
	}
	return Attempt{}, errKeptChanging("update attempt")
}

// CompleteAttempt implements Store: the compare-and-swap of cas.go, in two
// statements sent at once (pgCompleteJob and pgCompleteFate, see
// pgCompletePipeline) or, where they cannot be, in one (pgCompleteAttempt).
func (s *PostgresStore) CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error) {
	var r completedRow
	err := s.complete(ctx, c, &r)
	if err == nil && !r.found {
		err = sql.ErrNoRows
	}
	if errors.Is(err, sql.ErrNoRows) {
		return whyNotCompleted(ctx, s, c)
	}
	if err != nil {
		return Job{}, Attempt{}, s.interpret("complete attempt", err)
	}
	stored := c.At.UTC().Truncate(time.Microsecond) // as stored: both paths send whole microseconds
	r.a.UpdatedAt, r.a.FinishedAt = stored, stored
	return completed(r.j, r.a)
}

// complete runs Complete's statements on a connection of the pool and
// reads the job and the attempt after the step into r.
func (s *PostgresStore) complete(ctx context.Context, c Completion, r *completedRow) error {
	return pgxOn(ctx, s.db, func(pc *pgx.Conn) error {
		*r = completedRow{} // a try again after a closed connection starts afresh
		err := pgCompletePipeline(ctx, pc, c, r)
		if errors.Is(err, errNotPipelined) {
			err = r.scan(c, func(args, dest []any) error {
				return pc.QueryRow(ctx, pgCompleteAttempt, args...).Scan(dest...)
			})
		}
		return err
	}, func(conn *sql.Conn) error {
		return r.scan(c, func(args, dest []any) error {
			return conn.QueryRowContext(ctx, pgCompleteAttempt, args...).Scan(dest...)
		})
	})
}

// scan runs pgCompleteAttempt through query, which scans its row into
// dest, and reads the row into r.
func (r *completedRow) scan(c Completion, query func(args, dest []any) error) error {
	var row struct {
		j     pgJob
		state string
		seq   int32
		at    time.Time
		dest  [16 + 8]any
		args  [7]any
	}
	d := row.j.dest(row.dest[:0])
	d = append(d, &row.seq, &r.a.Provider, pgState{&row.state}, &r.a.BaseVersion, &r.a.Hedge, &r.a.ProviderRef, &r.a.Reason, &row.at)
	// The time as pgx's own type, which it encodes without wrapping it.
	at := pgtype.Timestamptz{Time: c.At, Valid: true}
	args := append(row.args[:0], c.AttemptID, string(c.Result), at, c.ClaimToken,
		reasonLostPrefix, reasonLostSuffix, reasonClosedPrefix)
	if err := query(args, d); err != nil {
		return err
	}
	r.j = row.j.job()
	r.a.ID, r.a.JobID, r.a.State, r.a.Seq = c.AttemptID, r.j.ID, AttemptState(row.state), int(row.seq)
	r.a.CreatedAt = row.at.UTC()
	r.found = true
	return nil
}

// StaleAttempts implements Store.
func (s *PostgresStore) StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	upper := q.UnknownBefore
	if q.OpenBefore.After(upper) {
		upper = q.OpenBefore
	}
	unclaimed := q.UnclaimedAt
	if unclaimed.IsZero() {
		unclaimed = endOfTime
	}
	return queryAll(ctx, s.db, s, "list stale attempts", scanAttempt, pgStaleAttempts,
		q.UnknownBefore, q.OpenBefore, upper, limit, unclaimed)
}

// ClaimAttempt implements Store.
func (s *PostgresStore) ClaimAttempt(ctx context.Context, c AttemptClaim) (Attempt, bool, error) {
	if err := c.Check(); err != nil {
		return Attempt{}, false, err
	}
	if !c.State.Open() { // only an attempt in doubt is reconciled
		return Attempt{}, false, nil
	}
	a, err := scanAttempt(s.db.QueryRowContext(ctx, pgClaimAttempt, c.ID, string(c.State), c.UpdatedAt, c.Token, c.At, c.Until))
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, false, nil
	}
	if err != nil {
		return Attempt{}, false, s.interpret("claim attempt", err)
	}
	return a, true, nil
}

// RenewClaim implements Store.
func (s *PostgresStore) RenewClaim(ctx context.Context, c AttemptClaim) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	n, err := rowsAffected(ctx, s.db, pgRenewClaim, c.ID, c.Token, c.Until)
	if err != nil {
		return false, s.interpret("renew claim", err)
	}
	return n == 1, nil
}

// RecordVerification implements Store.
func (s *PostgresStore) RecordVerification(ctx context.Context, v Verification) error {
	var expires any
	if !v.ExpiresAt.IsZero() {
		expires = v.ExpiresAt
	}
	_, err := s.db.ExecContext(ctx, pgRecordVerification,
		v.ID, v.Provider, v.Kind, v.ContractVersion, v.Passed, v.Reason, v.VerifiedAt, expires)
	return s.interpret("record verification", err)
}

// Verifications implements Store.
func (s *PostgresStore) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.db, s, "list verifications", scanVerification, pgVerifications, f.Provider, f.Kind, f.ContractVersion, limit)
}

// PurgeJobs implements Store: one statement per batch, which never waits
// for a row lock (pgPurge).
func (s *PostgresStore) PurgeJobs(ctx context.Context, q PurgeQuery) (PurgeCount, error) {
	var n PurgeCount
	var err error
	switch {
	case q.DryRun:
		err = s.db.QueryRowContext(ctx, pgCountPurgeable, q.Before).Scan(&n.Jobs, &n.Attempts)
	case q.Limit > 0:
		err = s.db.QueryRowContext(ctx, pgPurge, q.Before, q.Limit).Scan(&n.Jobs, &n.Attempts)
	}
	if err != nil {
		return PurgeCount{}, s.interpret("purge", err)
	}
	return n, nil
}

// The reads that explain a refused write (see rowReader).

func (s *PostgresStore) jobForWrite(ctx context.Context, id string) (Job, error) {
	return s.Job(ctx, id)
}

func (s *PostgresStore) attemptForWrite(ctx context.Context, id string) (Attempt, error) {
	return s.Attempt(ctx, id)
}

func (s *PostgresStore) blocker(ctx context.Context, jobID string) (*AttemptInFlightError, error) {
	return queryOne(ctx, s.db, s, "find blocking attempt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, jobID)
	}, pgBlocker, jobID)
}

func (s *PostgresStore) otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error) {
	return queryOne(ctx, s.db, s, "find attempt in doubt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, a.JobID)
	}, pgOtherInDoubt, a.JobID, a.ID)
}

func (s *PostgresStore) claimToken(ctx context.Context, attemptID string) (string, error) {
	return queryOne(ctx, s.db, s, "check claim", attemptNotFound(attemptID), scanValue[string], pgClaimToken, attemptID)
}

// interpret maps pgx's errors to this package's errors.
func (s *PostgresStore) interpret(op string, err error) error {
	if err, ok := passThrough(op, err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "23505" {
			switch pgErr.ConstraintName {
			case "jobs_owner_key_unique":
				return errUniqueKey
			case "job_attempts_one_in_doubt":
				return errUniqueInDoubt
			}
		}
		kind := StorageOther
		switch {
		case pgErr.Code == "53100" || pgErr.Code == "53200" || pgErr.Code == "54000":
			kind = StorageFull
		case pgErr.Code == "25006":
			kind = StorageReadOnly
		case pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03":
			kind = StorageBusy
		case pgErr.Code == "42P01" || pgErr.Code == "42703":
			kind = StorageSchema
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"), pgErr.Code == "53300":
			kind = StorageUnavailable
		}
		return &StorageError{Op: op, Kind: kind, Code: pgErr.Code, Message: pgErr.Message}
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sql.ErrConnDone) {
		return &StorageError{Op: op, Kind: StorageUnavailable, Message: err.Error()}
	}
	return &StorageError{Op: op, Kind: StorageOther, Message: err.Error()}
}

// endOfTime stands for "no bound" where a query compares claims with a time.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Listening: Manager.Wait through LISTEN/NOTIFY.

// NotifyClosed implements CloseNotifier. All waiters of a store share one
// connection, opened with the settings of the store's pool (or those of
// ListenDSN) but outside it, which LISTENs while at least one waiter is
// registered and is closed when the last one leaves. Once it listens, each
// waiter marks its job as watched: the schema's trigger notifies only for a
// job so marked. If it cannot listen within five seconds, NotifyClosed
// returns an error and the waiter polls.
// Behind a proxy that does not keep one server connection for it
// (PgBouncer in transaction pooling mode), the connection would LISTEN but
// never hear a notification: NotifyClosed finds out with a probe
// notification, returns an error saying so, and for ten minutes answers
// every waiter with it at once.
func (s *PostgresStore) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	return s.listener.subscribe(ctx, s.db, jobID)
}

// closedChannel is the channel on which the schema's trigger announces a
// job that became terminal; the payload is the job's ID.
const closedChannel = "jobs_closed"

// Timing of the listening connection.
const (
	// listenReadyTimeout bounds how long a waiter waits for the listening
	// connection before it falls back to polling.
	listenReadyTimeout = 5 * time.Second
	// listenRetryMax is the longest pause between two tries to connect
	// again, so that waiters hear of the jobs that close on a new primary
	// within a second of its promotion.
	listenRetryMax = time.Second
	// listenProbeTimeout bounds the wait for the probe notification that
	// proves a connection through a proxy can hear others.
	listenProbeTimeout = 2 * time.Second
	// listenDeafRecheck is how long waiters poll, after a listening
	// connection was found unable to hear notifications, before the store
	// tries again.
	listenDeafRecheck = 10 * time.Minute
)

// deafError reports a listening connection that notifications do not
// reach. Manager.Wait warns about it once.
type deafError struct {
	direct bool // the connection was opened with ListenDSN
}

func (e *deafError) Error() string {
	if e.direct {
		return "jobs: listen: notifications do not reach the connection opened with ListenDSN: " +
			"it goes through a proxy that does not keep one server connection for it (PgBouncer in transaction pooling mode?); " +
			"point ListenDSN at the database itself"
	}
	return "jobs: listen: notifications do not reach the store's listening connection: " +
		"it goes through a proxy that does not keep one server connection for it (PgBouncer in transaction pooling mode?); " +
		"open the store with ListenDSN set to a direct connection to the database"
}

// closeListener fans the notifications of one listening connection out to
// the waiters registered for each job.
type closeListener struct {
	config *pgx.ConnConfig // from ListenDSN; nil: the settings of the store's pool

	mu        sync.Mutex
	waiters   map[string]map[*closeWaiter]struct{} // by job ID
	count     int
	session   *listenSession // nil when nobody listens
	deaf      *deafError     // the last listening connection heard nothing
	deafUntil time.Time      // when to try listening again
	running   sync.WaitGroup // the sessions' goroutines
}

type closeWaiter struct{ wake chan struct{} }

// listenSession is one run of the listening goroutine, from the first
// waiter to the last.
type listenSession struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed when LISTEN is in effect, or the first try failed
	err    error         // the first try's error, set before ready is closed
	up     atomic.Bool   // LISTEN is in effect now
	done   chan struct{} // closed when the goroutine has returned
}

// ended reports whether the session's goroutine has returned (it stops on
// its own when the connection cannot hear notifications).
func (s *listenSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (w *closeWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (l *closeListener) subscribe(ctx context.Context, db *sql.DB, jobID string) (<-chan struct{}, func(), error) {
	w := &closeWaiter{wake: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.deaf != nil && time.Now().Before(l.deafUntil) {
		err := l.deaf
		l.mu.Unlock()
		return nil, nil, err
	}
	if l.waiters == nil {
		l.waiters = map[string]map[*closeWaiter]struct{}{}
	}
	if l.waiters[jobID] == nil {
		l.waiters[jobID] = map[*closeWaiter]struct{}{}
	}
	l.waiters[jobID][w] = struct{}{}
	l.count++
	if l.session == nil || l.session.ended() {
		if l.session != nil {
			l.session.cancel() // it heard nothing and stopped; release its context
		}
		sctx, cancel := context.WithCancel(context.Background())
		l.session = &listenSession{cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
		l.running.Add(1)
		go l.run(sctx, db, l.session)
	}
	sess := l.session
	l.mu.Unlock()

	var once sync.Once
	stop := func() { once.Do(func() { l.unsubscribe(jobID, w) }) }
	t := time.NewTimer(listenReadyTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	case <-t.C:
		stop()
		return nil, nil, &StorageError{Op: "listen", Kind: StorageUnavailable, Message: "not listening yet"}
	case <-sess.ready:
	}
	if sess.err != nil && !sess.up.Load() {
		// The first try failed and no later one has succeeded yet.
		stop()
		return nil, nil, sess.err
	}
	// Listening: now mark the job, so that its closing notifies. The
	// caller reads the job after this returns, which catches a close that
	// came first (see 0005_hot_closes.sql). The mark stays when the waiter
	// leaves: it costs one notification too many, removing it a write.
	if _, err := db.ExecContext(ctx, pgWatchJob, jobID); err != nil {
		stop()
		return nil, nil, &StorageError{Op: "listen", Kind: StorageUnavailable, Message: "mark the job watched: " + err.Error()}
	}
	return w.wake, stop, nil
}

// pgWatchJob marks a job as waited for: the close trigger notifies only
// for a marked job. The UPDATE changes no indexed column (a HOT update) and
// none that a reader of the job sees.
const pgWatchJob = `UPDATE jobs SET watched = true WHERE id = $1 AND NOT watched`

func (l *closeListener) unsubscribe(jobID string, w *closeWaiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[jobID], w)
	if len(l.waiters[jobID]) == 0 {
		delete(l.waiters, jobID)
	}
	l.count--
	if l.count == 0 && l.session != nil {
		l.session.cancel()
		l.session = nil
	}
}

// close stops the listening goroutine, if any, and waits for it to return.
// Registered waiters stop being notified and fall back to polling.
func (l *closeListener) close() {
	l.mu.Lock()
	sess := l.session
	l.session = nil
	l.mu.Unlock()
	if sess != nil {
		sess.cancel()
	}
	l.running.Wait()
}

func (l *closeListener) dispatch(jobID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.waiters[jobID] {
		w.signal()
	}
}

// wakeAll wakes every waiter: notifications may have been lost while the
// connection was down.
func (l *closeListener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ws := range l.waiters {
		for w := range ws {
			w.signal()
		}
	}
}

// run listens until ctx ends, reconnecting with a backoff when the
// connection fails. The first failure is reported to the waiters through
// sess.err (they poll instead); later ones only delay notifications, and
// the waiters are woken after every reconnect. A connection that cannot
// hear notifications ends the session: waiters are woken, and new ones are
// told to poll for listenDeafRecheck.
func (l *closeListener) run(ctx context.Context, db *sql.DB, sess *listenSession) {
	defer l.running.Done()
	defer close(sess.done)
	first := true
	ready := func(err error) {
		if first {
			first = false
			sess.err = err
			close(sess.ready)
		}
	}
	pause := 100 * time.Millisecond
	for {
		connected := false
		err := l.listen(ctx, db, func() {
			connected = true
			sess.up.Store(true)
			if !first {
				l.wakeAll()
			}
			ready(nil)
		}, l.dispatch)
		sess.up.Store(false)
		if ctx.Err() != nil {
			ready(ctx.Err())
			return
		}
		var deaf *deafError
		if errors.As(err, &deaf) {
			l.mu.Lock()
			l.deaf, l.deafUntil = deaf, time.Now().Add(listenDeafRecheck)
			l.mu.Unlock()
			ready(deaf)
			l.wakeAll()
			return
		}
		ready(&StorageError{Op: "listen", Kind: StorageUnavailable, Message: err.Error()})
		if connected {
			pause = 100 * time.Millisecond
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, listenRetryMax)
	}
}

// listen opens a connection of its own, with the settings of ListenDSN or
// those of the connections of db, LISTENs on it, calls listening, then
// passes every notification's payload to notify until ctx ends or the
// connection fails. The connection is outside db's pool, so that waiters
// never take a slot that queries need; it is closed when listen returns.
//
// A connection whose backend is not the one that greeted it goes through a
// proxy. Notifications reach it only if the proxy keeps one server
// connection for it (PgBouncer's session pooling, not its transaction
// pooling): a probe notification sent from another session through db
// tells which, and listen returns a *deafError if it does not arrive.
func (l *closeListener) listen(ctx context.Context, db *sql.DB, listening func(), notify func(jobID string)) error {
	var cfg *pgx.ConnConfig
	if l.config != nil {
		cfg = l.config.Copy()
	} else {
		var err error
		if cfg, err = connConfig(ctx, db); err != nil {
			return err
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var backend uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeExec).Scan(&backend); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+closedChannel); err != nil {
		return err
	}
	if backend != conn.PgConn().PID() {
		if err := probe(ctx, conn, db, notify); err != nil {
			var deaf *deafError
			if errors.As(err, &deaf) {
				deaf.direct = l.config != nil
			}
			return err
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == closedChannel {
			notify(n.Payload)
		}
	}
}

// probe sends a notification on closedChannel through db, from another
// session than conn's, and waits for conn to hear it. Other notifications
// heard meanwhile go to notify. It returns a *deafError if the probe does
// not arrive within listenProbeTimeout.
func probe(ctx context.Context, conn *pgx.Conn, db *sql.DB, notify func(jobID string)) error {
	b := make([]byte, 8)
	rand.Read(b)
	token := "probe-" + hex.EncodeToString(b) // no job has this ID
	if _, err := db.ExecContext(ctx, "SELECT pg_notify($1, $2)", closedChannel, token); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(pctx)
		switch {
		case err != nil && pctx.Err() != nil && ctx.Err() == nil:
			return &deafError{}
		case err != nil:
			return err
		case n.Channel != closedChannel:
		case n.Payload == token:
			return nil
		default:
			notify(n.Payload)
		}
	}
}

// connConfig returns the settings of db's connections (host, credentials,
// search_path, TLS), read from one of them.
func connConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("jobs: listen needs the pgx driver, have %T", dc)
		}
		cfg = sc.Conn().Config() // a copy
		// The copy still delivers notifications to the pooled connection;
		// the new connection must buffer its own.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}

// Key reuse: ReplaceJob retires the old job's key and creates the new job
// in one step. The unique constraint on (owner, idempotency_key) still
// binds every key: a retired job holds RetiredKey(key, new job's ID) in that
// column, longer than any key a client can submit and unique per
// replacement, which scanJob reads back into Job.Key and Job.ReplacedBy.

const (
	// pgReplaceJob retires the old job's key and inserts the new job, in
	// one statement: both or neither. The key is retired only if no
	// attempt of the old job may still act (blocker: starting, running or
	// unknown) or has acted with its result dropped. A terminal job gets no
	// new attempt and its attempts only move on to terminal states, so the
	// statement's snapshot, taken after the caller found the job terminal,
	// holds every attempt that could block it. The UPDATE locks the old
	// row; a concurrent replacement waits for it, then finds the key moved
	// and retires nothing. The INSERT's unique check does not see the old
	// row's key, which this statement itself has moved; a concurrent Submit
	// of the key waits for this statement's transaction and then finds the
	// new job. It returns the new job with two empty columns, or the old
	// job with the attempt that blocked it (when the job still held the
	// key in one of the states), or no row if nothing was retired for
	// another reason.
	pgReplaceJob = `WITH blocker AS (
    SELECT id, state FROM job_attempts
     WHERE job_id = $10 AND state IN ('starting', 'unknown', 'running')
     ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1
), retired AS (
    UPDATE jobs SET idempotency_key = $9
     WHERE id = $10 AND owner = $2 AND idempotency_key = $3 AND state IN ($11, $12, $13)
       AND NOT EXISTS (SELECT 1 FROM blocker)
       AND NOT EXISTS (SELECT 1 FROM job_attempts a
                        WHERE a.job_id = $10 AND a.state = 'cancelled'
                          AND a.reason IN ('` + ReasonDroppedJobCancelled + `', '` + ReasonDroppedJobFailed + `'))
    RETURNING id
), created AS (
    INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8 WHERE EXISTS (SELECT 1 FROM retired)
    RETURNING ` + jobCols + `
)
SELECT *, '', '' FROM created
UNION ALL
SELECT ` + pgJobColsOfJobs + `, blocker.id, blocker.state FROM jobs, blocker
 WHERE jobs.id = $10 AND jobs.owner = $2 AND jobs.idempotency_key = $3 AND jobs.state IN ($11, $12, $13)`
)

// ReplaceJob implements Store.
func (s *PostgresStore) ReplaceJob(ctx context.Context, r JobReplacement) (Job, bool, error) {
	if err := r.Check(); err != nil {
		return Job{}, false, err
	}
	j := r.New
	a, b, c := jobStates(r.From)
	var blocker AttemptInFlightError
	got, err := scanJobAnd(s.db.QueryRowContext(ctx, pgReplaceJob,
		j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt,
		RetiredKey(j.Key, j.ID), r.OldID, a, b, c), &blocker.AttemptID, &blocker.State)
	switch {
	case err == nil && blocker.AttemptID != "":
		blocker.JobID = r.OldID
		return Job{}, false, &blocker
	case !errors.Is(err, sql.ErrNoRows):
		return got, err == nil, s.interpret("replace job", err)
	}
	// Nothing retired: the key is another job's now, or free.
	return s.CreateJob(ctx, j)
}
