package perf

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Baseline is the SQL a competent engineer would hand-write for the same
// work, on a lean schema of its own: a jobs table with UNIQUE (owner,
// idempotency_key) and an attempts table, no triggers, no CHECK
// constraints, no indexes beyond what its statements and the one-attempt-
// in-doubt rule need. It reads back only what a caller needs: an ID and
// whether it was created, or whether a completion won.
//
//   - Submit is INSERT … ON CONFLICT (owner, idempotency_key) DO NOTHING
//     RETURNING id, plus a SELECT of the stored request hash when the key
//     exists (a key bound to another request is refused).
//   - StartAttempt is one guarded INSERT … SELECT: the job is pending and
//     none of its attempts is starting, running or in doubt; a unique
//     partial index on attempts in doubt makes the guard hold between
//     concurrent inserts too. MarkRunning is a state-guarded UPDATE.
//   - Complete is the compare-and-swap of cas.go plus marking the
//     attempt won or lost: one statement (a data-modifying CTE) on
//     PostgreSQL, one short immediate transaction of two statements on
//     SQLite. With CompleteInTransaction it is instead a transaction of four
//     statements (read the attempt, the CAS, mark the attempt, commit), a
//     second reference point.
type Baseline struct {
	dialect string
	style   CompleteStyle
	w, r    *sql.DB // writes (on SQLite one connection), reads
	tables  *Tables
	trips   atomic.Int64
	q       map[string]string // the statements in the dialect's form
}

// CompleteStyle is how the baseline completes an attempt.
type CompleteStyle int

const (
	// CompleteInOneStatement is the compare-and-swap and the attempt's
	// fate in one statement on PostgreSQL, and in one immediate transaction
	// of two statements on SQLite. The baseline "sql".
	CompleteInOneStatement CompleteStyle = iota
	// CompleteInTransaction reads the attempt, then swaps, then marks the
	// attempt, then commits: four statements. The baseline "sql-tx", which
	// runs only the Complete workload.
	CompleteInTransaction
)

// The lean schema. Times are set by the database.
const (
	leanSchemaPostgres = `CREATE TABLE IF NOT EXISTS jobs (
    id              text        PRIMARY KEY,
    owner           text        NOT NULL,
    idempotency_key text        NOT NULL,
    kind            text        NOT NULL,
    provider        text        NOT NULL,
    params          json        NOT NULL,
    request_hash    text        NOT NULL,
    state           text        NOT NULL DEFAULT 'pending',
    version         bigint      NOT NULL DEFAULT 1,
    result          json,
    completed_by    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, idempotency_key)
);
CREATE TABLE IF NOT EXISTS attempts (
    id           text        PRIMARY KEY,
    job_id       text        NOT NULL REFERENCES jobs (id),
    provider     text        NOT NULL,
    state        text        NOT NULL DEFAULT 'starting',
    base_version bigint      NOT NULL,
    provider_ref text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX IF NOT EXISTS attempts_job_id ON attempts (job_id);
CREATE UNIQUE INDEX IF NOT EXISTS attempts_one_in_doubt ON attempts (job_id) WHERE state IN ('starting', 'unknown')`

	leanSchemaSQLite = `CREATE TABLE IF NOT EXISTS jobs (
    id              TEXT    PRIMARY KEY,
    owner           TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    params          TEXT    NOT NULL,
    request_hash    TEXT    NOT NULL,
    state           TEXT    NOT NULL DEFAULT 'pending',
    version         INTEGER NOT NULL DEFAULT 1,
    result          TEXT,
    completed_by    TEXT,
    created_at      INTEGER NOT NULL DEFAULT (unixepoch()),
    UNIQUE (owner, idempotency_key)
);
CREATE TABLE IF NOT EXISTS attempts (
    id           TEXT    PRIMARY KEY,
    job_id       TEXT    NOT NULL REFERENCES jobs (id),
    provider     TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'starting',
    base_version INTEGER NOT NULL,
    provider_ref TEXT,
    created_at   INTEGER NOT NULL DEFAULT (unixepoch()),
    finished_at  INTEGER
);
CREATE INDEX IF NOT EXISTS attempts_job_id ON attempts (job_id);
CREATE UNIQUE INDEX IF NOT EXISTS attempts_one_in_doubt ON attempts (job_id) WHERE state IN ('starting', 'unknown')`
)

// The lean schema, as the workloads prefill it.
var leanSchemas = map[string]schema{
	Postgres: {jobs: "jobs", attempts: "attempts", jobCols: ", request_hash", jobVals: ", md5(random()::text) || md5(random()::text)", raceJobState: "pending"},
	SQLite:   {jobs: "jobs", attempts: "attempts", jobCols: ", request_hash", jobVals: ", lower(hex(randomblob(32)))", raceJobState: "pending"},
}

// The baseline's statements, written with $n placeholders; {now} is the
// dialect's current time.
const (
	leanInsert = `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, request_hash)
VALUES ($1, $2, $3, 'charge', 'psp', $4, $5)
ON CONFLICT (owner, idempotency_key) DO NOTHING
RETURNING id`
	leanByKey = `SELECT id, request_hash FROM jobs WHERE owner = $1 AND idempotency_key = $2`

	leanStart = `INSERT INTO attempts (id, job_id, provider, base_version)
SELECT $2, id, provider, version FROM jobs
 WHERE id = $1 AND state = 'pending'
   AND NOT EXISTS (SELECT 1 FROM attempts WHERE job_id = $1 AND state IN ('starting', 'running', 'unknown'))`
	leanRunning = `UPDATE attempts SET state = 'running', provider_ref = $2 WHERE id = $1 AND state = 'starting'`

	// The compare-and-swap and the attempt's fate in one statement.
	leanCompletePostgres = `WITH a AS (
    SELECT job_id, base_version FROM attempts
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
), won AS (
    UPDATE jobs SET result = $2, completed_by = $1, state = 'succeeded', version = jobs.version + 1
      FROM a
     WHERE jobs.id = a.job_id AND jobs.version = a.base_version AND jobs.completed_by IS NULL
    RETURNING jobs.id
)
UPDATE attempts SET state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded' ELSE 'lost' END, finished_at = now()
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
RETURNING state = 'succeeded'`
	// SQLite: the compare-and-swap, reading the attempt in the same
	// statement. (UPDATE … FROM, the other way to write it, is slower on
	// SQLite: 70–80 µs against 40–45 µs a Complete, one after another at
	// synchronous=NORMAL, as it builds a temporary table of the join.)
	leanCASFromAttempt = `UPDATE jobs SET result = $2, completed_by = $1, state = 'succeeded', version = version + 1
 WHERE (id, version) = (SELECT job_id, base_version FROM attempts
                         WHERE id = $1 AND state IN ('starting', 'running', 'unknown'))
   AND completed_by IS NULL`

	// The four statements of CompleteInTransaction (with the attempt's
	// fate, leanFinish).
	leanAttempt = `SELECT job_id, base_version FROM attempts
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown'){lock}`
	leanCAS = `UPDATE jobs SET result = $3, completed_by = $4, state = 'succeeded', version = version + 1
 WHERE id = $1 AND version = $2 AND completed_by IS NULL`

	leanFinish = `UPDATE attempts SET state = $2, finished_at = {now}
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown')`
)

// OpenBaseline creates the lean schema on db, if it is not there yet, and
// returns the baseline that completes attempts in the given style. On
// SQLite it opens one writer connection and a pool of readers with the
// settings of jobs.OpenSQLite, as the library does.
func OpenBaseline(ctx context.Context, db Database, style CompleteStyle) (*Baseline, error) {
	if err := db.validate(); err != nil {
		return nil, err
	}
	b := &Baseline{dialect: db.Dialect, style: style}
	ddl, now, lock := leanSchemaPostgres, "now()", " FOR UPDATE"
	switch db.Dialect {
	case Postgres:
		pool, err := openPostgres(db.DSN, &b.trips)
		if err != nil {
			return nil, err
		}
		b.w, b.r = pool, pool
	case SQLite:
		ddl, now, lock = leanSchemaSQLite, "unixepoch()", ""
		var err error
		if b.w, err = openSQLiteWriter(ctx, db.DSN, db.Synchronous); err != nil {
			return nil, err
		}
		if b.r, err = openSQLiteReader(db.DSN, db.Synchronous); err != nil {
			b.Close()
			return nil, err
		}
	}
	for _, stmt := range strings.Split(ddl, ";\n") {
		if _, err := b.w.ExecContext(ctx, stmt); err != nil {
			b.Close()
			return nil, fmt.Errorf("baseline schema: %w", err)
		}
	}
	b.q = map[string]string{}
	for _, query := range []string{leanInsert, leanByKey, leanStart, leanRunning, leanCompletePostgres,
		leanCASFromAttempt, leanAttempt, leanCAS, leanFinish} {
		b.q[query] = rebind(db.Dialect, strings.NewReplacer("{now}", now, "{lock}", lock).Replace(query))
	}
	b.tables = newTables(db.Dialect, b.w, b.r, leanSchemas[db.Dialect])
	return b, nil
}

// Name implements Contender.
func (b *Baseline) Name() string {
	if b.style == CompleteInTransaction {
		return "sql-tx"
	}
	return "sql"
}

// Runs implements Contender: the baseline runs every workload, and its
// CompleteInTransaction style only Complete.
func (b *Baseline) Runs(w Workload) bool {
	return b.style == CompleteInOneStatement || w.Kind == Complete
}

// requestHash binds a key to its request, as the library's fingerprint
// does (without canonicalizing the JSON: a hand-written client sends the
// same bytes again).
func requestHash(params json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte("charge\x00psp\x00"))
	h.Write(params)
	return hex.EncodeToString(h.Sum(nil))
}

// Submit implements Contender.
func (b *Baseline) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	hash := requestHash(params)
	id, err := b.insert(ctx, newID("job_"), owner, key, string(params), hash)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	var stored string
	if err := b.r.QueryRowContext(ctx, b.q[leanByKey], owner, key).Scan(&id, &stored); err != nil {
		return "", false, err
	}
	if stored != hash {
		return "", false, fmt.Errorf("key %q is bound to another request", key)
	}
	return id, false, nil
}

// insert runs leanInsert and returns the new job's ID, or sql.ErrNoRows
// if the key is taken. It reads the statement to its end, not one row and
// a reset, as QueryRow would: SQLite runs a write's checkpoint hook when
// the statement finishes, so an insert read with QueryRow never
// checkpoints, and the write-ahead log of a database written only that
// way grows without bound (by about 85 MB every 5,000 new keys of this
// workload), the cost of copying its pages into the database left out of
// every measurement.
func (b *Baseline) insert(ctx context.Context, args ...any) (string, error) {
	rows, err := b.w.QueryContext(ctx, b.q[leanInsert], args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	id := ""
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if id == "" {
		return "", sql.ErrNoRows
	}
	return id, nil
}

// StartRunning implements Lifecycle.
func (b *Baseline) StartRunning(ctx context.Context, jobID string) (string, error) {
	id := newID("att_")
	if err := b.execOne(ctx, "start attempt", b.q[leanStart], jobID, id); err != nil {
		return "", err
	}
	if err := b.execOne(ctx, "mark running", b.q[leanRunning], id, "ref-"+id); err != nil {
		return "", err
	}
	return id, nil
}

// execOne runs a guarded statement that must change one row.
func (b *Baseline) execOne(ctx context.Context, what, query string, args ...any) error {
	res, err := b.w.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%s: refused (%d rows, %v)", what, n, err)
	}
	return nil
}

// Complete implements Lifecycle.
func (b *Baseline) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	if b.style == CompleteInTransaction || b.dialect == SQLite {
		return b.completeInTx(ctx, attemptID, result)
	}
	var won bool
	err := b.w.QueryRowContext(ctx, b.q[leanCompletePostgres], attemptID, string(result)).Scan(&won)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("complete %s: attempt not open", attemptID)
	}
	return won, err
}

// completeInTx completes in one transaction: the compare-and-swap, then the
// attempt's fate. With CompleteInTransaction it reads the attempt first;
// otherwise (SQLite) the compare-and-swap reads it itself.
func (b *Baseline) completeInTx(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	tx, err := b.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	cas, args := b.q[leanCASFromAttempt], []any{attemptID, string(result)}
	if b.style == CompleteInTransaction {
		var jobID string
		var base int64
		if err := tx.QueryRowContext(ctx, b.q[leanAttempt], attemptID).Scan(&jobID, &base); err != nil {
			return false, fmt.Errorf("complete %s: %w", attemptID, err)
		}
		cas, args = b.q[leanCAS], []any{jobID, base, string(result), attemptID}
	}
	res, err := tx.ExecContext(ctx, cas, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	won, state := n == 1, "lost"
	if won {
		state = "succeeded"
	}
	if res, err = tx.ExecContext(ctx, b.q[leanFinish], attemptID, state); err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, fmt.Errorf("complete %s: attempt not open (%d rows, %v)", attemptID, n, err)
	}
	return won, tx.Commit()
}

// CountJobs implements Contender.
func (b *Baseline) CountJobs(ctx context.Context, owner string) (int, error) {
	return b.tables.CountJobs(ctx, owner)
}

// Tables implements Lifecycle.
func (b *Baseline) Tables() *Tables { return b.tables }

// CloseIdleConns implements ConnWarmer.
func (b *Baseline) CloseIdleConns() { closeIdle(b.w) }

// WarmConns implements ConnWarmer.
func (b *Baseline) WarmConns(ctx context.Context, n int) error {
	return warmPool(ctx, b.dialect, b.w, n)
}

// RoundTrips implements Contender.
func (b *Baseline) RoundTrips() int64 { return b.trips.Load() }

// Close implements Contender.
func (b *Baseline) Close() error {
	if b.r == b.w {
		return closeAll(b.w)
	}
	return closeAll(b.w, b.r)
}
