package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
)

// OpenPostgres connects to PostgreSQL through pgx's database/sql driver and
// applies the schema (see Migrations). dsn is a pgx connection string, e.g.
// "postgres://app@db:5432/app?sslmode=disable"; add search_path=NAME to keep
// the tables in their own schema. Close the store to close the connection
// pool.
func OpenPostgres(ctx context.Context, dsn string, opts ...StoreOption) (*SQLStore, error) {
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
// opened with the "pgx" driver, and applies the schema. The caller keeps
// ownership of db.
func NewPostgresStore(ctx context.Context, db *sql.DB, opts ...StoreOption) (*SQLStore, error) {
	s := newSQLStore(postgresDialect, db, nil)
	if err := s.init(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// NewPostgresStoreSQLX is NewPostgresStore for an *sqlx.DB.
func NewPostgresStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...StoreOption) (*SQLStore, error) {
	return NewPostgresStore(ctx, db.DB, opts...)
}

var postgresDialect = &dialect{
	name:         "postgres",
	rebind:       func(q string) string { return q },
	ts:           func(t time.Time) any { return t },
	interpret:    interpretPostgres,
	ctes:         true,
	beginMigrate: "BEGIN",
	// One lock per schema, so that tests in separate schemas do not wait on each other.
	lockMigrate: `SELECT pg_advisory_xact_lock(hashtext('jobs.migrate.' || current_schema()))`,
	beginWrite:  "BEGIN",

	// Submit in one round trip: insert, or return the existing row. A
	// duplicate inserted by a transaction that committed after this statement
	// began is invisible to its snapshot; the caller then reads it again.
	createJob: `WITH ins AS (
    INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING ` + jobCols + `
)
SELECT ` + jobCols + `, true FROM ins
UNION ALL
SELECT ` + jobCols + `, false FROM jobs
 WHERE owner = $2 AND idempotency_key = $3 AND NOT EXISTS (SELECT 1 FROM ins)`,

	// StartAttempt in one statement: guard and count on the job row, then
	// insert the attempt with the job's version. The unique index on starting
	// attempts backs up the guard against concurrent inserts.
	startAttempt: `WITH j AS (
    UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $5
    ` + openJobGuard + `
    RETURNING id, version, attempt_count, provider
)
INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
SELECT $2, j.id, j.attempt_count, COALESCE(NULLIF($3, ''), j.provider), 'starting', j.version, $4, $5, $5 FROM j
RETURNING ` + attemptCols,

	// Complete in one statement. a and j lock the attempt, then its job, and
	// return their latest committed versions; won is the compare-and-swap of
	// DESIGN §3.4; att records the attempt's fate. The result ($2) appears
	// only in won: a loser's result is stored nowhere. A reconciler's claim
	// token ($4) must still be the attempt's, or nothing changes.
	completeCAS: `WITH a AS (
    SELECT id, job_id, base_version, state, claim_token FROM job_attempts WHERE id = $1 FOR UPDATE
), j AS (
    SELECT ` + qualify("jobs", jobCols) + ` FROM jobs JOIN a ON jobs.id = a.job_id FOR UPDATE OF jobs
), won AS (
    UPDATE jobs SET state = 'succeeded', result = $2, completed_by = $1, version = jobs.version + 1,
                    updated_at = $3, closed_at = $3
      FROM a
     WHERE jobs.id = a.job_id
       AND a.state IN ('starting', 'running', 'unknown')
       AND ($4 = '' OR a.claim_token = $4)
       AND jobs.version = a.base_version
       AND jobs.completed_by IS NULL
       AND jobs.state = 'running'
       AND EXISTS (SELECT 1 FROM j)
    RETURNING ` + qualify("jobs", jobCols) + `
), att AS (
    UPDATE job_attempts SET
        state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded'
                     WHEN (SELECT completed_by FROM j) IS NOT NULL THEN 'lost'
                     ELSE 'cancelled' END,
        reason = CASE WHEN EXISTS (SELECT 1 FROM won) THEN reason
                      WHEN (SELECT completed_by FROM j) IS NOT NULL
                      THEN 'result dropped: attempt ' || (SELECT completed_by FROM j) || ' completed the job first'
                      ELSE 'result dropped: job ' || (SELECT state FROM j) END,
        updated_at = $3,
        finished_at = $3
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
       AND ($4 = '' OR claim_token = $4)
    RETURNING ` + attemptCols + `
)
SELECT won.*, att.* FROM won, att
UNION ALL
SELECT j.*, att.* FROM j, att WHERE NOT EXISTS (SELECT 1 FROM won)`,
}

// interpretPostgres maps pgx errors to this package's errors.
func interpretPostgres(op string, err error) error {
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
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sql.ErrConnDone) {
		return &StorageError{Op: op, Kind: StorageUnavailable, Message: err.Error()}
	}
	return &StorageError{Op: op, Kind: StorageOther, Message: err.Error()}
}

// passThrough handles what both dialects treat alike: nil, errors that are
// already this package's, sql.ErrNoRows (handled by the caller) and context
// errors (kept matchable with errors.Is).
func passThrough(op string, err error) (error, bool) {
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		return err, true
	}
	var se *StorageError
	if errors.As(err, &se) || errors.Is(err, ErrNotFound) || errors.Is(err, errUniqueKey) || errors.Is(err, errUniqueInDoubt) {
		return err, true
	}
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return &StorageError{Op: op, Kind: StorageUnavailable, Message: ctxErr.Error(), cause: ctxErr}, true
		}
	}
	return nil, false
}
