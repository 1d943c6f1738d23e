package perf

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// MySQL is the dialect of MySQL and MariaDB (module mysql's store). A
// Database of this dialect has a go-sql-driver/mysql DSN naming a
// database of the contender's own.
const MySQL = "mysql"

// MaxMySQLConns bounds every MySQL pool of a benchmark, as MaxPostgresConns
// does PostgreSQL's.
const MaxMySQLConns = MaxPostgresConns

// mysqlDials numbers the dialers registered with the driver, one per pool.
var mysqlDials atomic.Int64

// mysqlCounted returns dsn with a network of its own whose connections
// count into trips the requests they send: the driver writes each command
// in one packet and waits for its answer.
func mysqlCounted(dsn string, trips *atomic.Int64) (string, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	name := "perf-tcp-" + strconv.FormatInt(mysqlDials.Add(1), 10)
	network := cfg.Net
	gomysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &CountingConn{Conn: c, N: trips}, nil
	})
	cfg.Net = name
	return cfg.FormatDSN(), nil
}

// MySQLLibrary is the jobs Manager on the MySQL store, opened as its users
// open it (mysql.Open).
type MySQLLibrary struct {
	M      *jobs.Manager
	Store  *mysql.Store
	tables *Tables
	trips  atomic.Int64
}

// OpenMySQLLibrary opens the MySQL store on db and applies its schema.
func OpenMySQLLibrary(ctx context.Context, db Database) (*MySQLLibrary, error) {
	if db.Dialect != MySQL || db.DSN == "" {
		return nil, fmt.Errorf("OpenMySQLLibrary: a %s database with a DSN is needed", MySQL)
	}
	l := &MySQLLibrary{}
	dsn, err := mysqlCounted(db.DSN, &l.trips)
	if err != nil {
		return nil, err
	}
	if l.Store, err = mysql.Open(ctx, dsn); err != nil {
		return nil, err
	}
	l.Store.DB().SetMaxOpenConns(MaxMySQLConns)
	l.Store.DB().SetMaxIdleConns(MaxMySQLConns)
	if l.M, err = jobs.New(l.Store, jobs.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		l.Store.Close()
		return nil, err
	}
	l.tables = newTables(MySQL, l.Store.DB(), l.Store.DB(), mysqlLibrarySchema)
	return l, nil
}

// Name implements Contender.
func (l *MySQLLibrary) Name() string { return "jobs" }

// Runs implements Contender: the library runs every workload.
func (l *MySQLLibrary) Runs(Workload) bool { return true }

// Submit implements Contender.
func (l *MySQLLibrary) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	j, created, err := l.M.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "psp", Params: params})
	return j.ID, created, err
}

// StartRunning implements Lifecycle.
func (l *MySQLLibrary) StartRunning(ctx context.Context, jobID string) (string, error) {
	a, err := l.M.StartAttempt(ctx, jobID, "")
	if err != nil {
		return "", err
	}
	if _, err := l.M.MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil {
		return "", err
	}
	return a.ID, nil
}

// Complete implements Lifecycle.
func (l *MySQLLibrary) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	_, err := l.M.Complete(ctx, attemptID, result)
	if errors.Is(err, jobs.ErrLostRace) {
		return false, nil
	}
	return err == nil, err
}

// CountJobs implements Contender.
func (l *MySQLLibrary) CountJobs(ctx context.Context, owner string) (int, error) {
	return l.tables.CountJobs(ctx, owner)
}

// Tables implements Lifecycle.
func (l *MySQLLibrary) Tables() *Tables { return l.tables }

// RoundTrips implements Contender.
func (l *MySQLLibrary) RoundTrips() int64 { return l.trips.Load() }

// CloseIdleConns implements ConnWarmer.
func (l *MySQLLibrary) CloseIdleConns() { closeIdle(l.Store.DB()) }

// WarmConns implements ConnWarmer.
func (l *MySQLLibrary) WarmConns(ctx context.Context, n int) error {
	return warmPool(ctx, MySQL, l.Store.DB(), n)
}

// Close implements Contender.
func (l *MySQLLibrary) Close() error { return l.Store.Close() }

// MySQLBaseline is the SQL a competent engineer would hand-write for
// MySQL, on a lean schema of its own: integer AUTO_INCREMENT keys, the
// request's SHA-256 as BINARY(32), only the columns the work needs, the
// one-attempt-in-doubt rule as a unique index on a generated column, and
// no CHECK constraints.
//
//   - Submit is INSERT … ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id):
//     one statement that inserts, or names the job that holds the key
//     (rows affected 1 or 0); a replay then reads the stored request hash.
//   - StartAttempt is one guarded INSERT … SELECT, MarkRunning a
//     state-guarded UPDATE.
//   - Complete is the compare-and-swap and the attempt's fate in one
//     multi-table UPDATE (two rows changed: won), then, for a loser, the
//     attempt marked lost; with CompleteInTransaction, a transaction that
//     locks the attempt (SELECT … FOR UPDATE), swaps, marks and commits.
type MySQLBaseline struct {
	style  CompleteStyle
	db     *sql.DB
	tables *Tables
	trips  atomic.Int64
}

const leanSchemaMySQL = `CREATE TABLE IF NOT EXISTS jobs (
    id              BIGINT         NOT NULL AUTO_INCREMENT,
    owner           VARBINARY(255) NOT NULL,
    idempotency_key VARBINARY(255) NOT NULL,
    kind            VARBINARY(64)  NOT NULL,
    provider        VARBINARY(64)  NOT NULL,
    params          LONGTEXT       NOT NULL,
    request_hash    BINARY(32)     NOT NULL,
    state           VARCHAR(16)    NOT NULL DEFAULT 'pending',
    version         BIGINT         NOT NULL DEFAULT 1,
    result          LONGTEXT,
    completed_by    BIGINT,
    created_at      DATETIME(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (id),
    UNIQUE KEY jobs_owner_key (owner, idempotency_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE IF NOT EXISTS attempts (
    id           BIGINT         NOT NULL AUTO_INCREMENT,
    job_id       BIGINT         NOT NULL,
    provider     VARBINARY(64)  NOT NULL,
    state        VARCHAR(16)    NOT NULL DEFAULT 'starting',
    base_version BIGINT         NOT NULL,
    provider_ref VARCHAR(255),
    in_doubt     BIGINT AS (CASE WHEN state IN ('starting', 'unknown') THEN job_id END) STORED,
    PRIMARY KEY (id),
    KEY attempts_job_id (job_id),
    UNIQUE KEY attempts_one_in_doubt (in_doubt)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`

const (
	mysqlLeanInsert = `INSERT INTO jobs (owner, idempotency_key, kind, provider, params, request_hash)
VALUES (?, ?, 'charge', 'psp', ?, ?)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`
	mysqlLeanHash  = `SELECT request_hash FROM jobs WHERE id = ?`
	mysqlLeanStart = `INSERT INTO attempts (job_id, provider, base_version)
SELECT id, provider, version FROM jobs
 WHERE id = ? AND state = 'pending'
   AND NOT EXISTS (SELECT 1 FROM attempts WHERE job_id = ? AND state IN ('starting', 'running', 'unknown'))`
	mysqlLeanRunning  = `UPDATE attempts SET state = 'running', provider_ref = ? WHERE id = ? AND state = 'starting'`
	mysqlLeanComplete = `UPDATE attempts a JOIN jobs j ON j.id = a.job_id
   SET j.result = ?, j.completed_by = a.id, j.state = 'succeeded', j.version = j.version + 1, a.state = 'succeeded'
 WHERE a.id = ? AND a.state IN ('starting', 'running', 'unknown')
   AND j.version = a.base_version AND j.completed_by IS NULL`
	mysqlLeanLost    = `UPDATE attempts SET state = 'lost' WHERE id = ? AND state IN ('starting', 'running', 'unknown')`
	mysqlLeanAttempt = `SELECT job_id, base_version FROM attempts
 WHERE id = ? AND state IN ('starting', 'running', 'unknown') FOR UPDATE`
	mysqlLeanCAS = `UPDATE jobs SET result = ?, completed_by = ?, state = 'succeeded', version = version + 1
 WHERE id = ? AND version = ? AND completed_by IS NULL`
	mysqlLeanFinish = `UPDATE attempts SET state = ? WHERE id = ?`
)

// OpenMySQLBaseline creates the lean schema on db, if it is not there yet,
// and returns the baseline that completes attempts in the given style. Its
// connections have the session settings of the library's (strict mode,
// READ COMMITTED, client-side interpolation), so that the comparison
// measures the statements.
func OpenMySQLBaseline(ctx context.Context, db Database, style CompleteStyle) (*MySQLBaseline, error) {
	if db.Dialect != MySQL || db.DSN == "" {
		return nil, fmt.Errorf("OpenMySQLBaseline: a %s database with a DSN is needed", MySQL)
	}
	b := &MySQLBaseline{style: style}
	var err error
	if b.db, err = openMySQLPool(ctx, db.DSN, &b.trips); err != nil {
		return nil, err
	}
	for _, stmt := range strings.Split(leanSchemaMySQL, ";\n") {
		if _, err := b.db.ExecContext(ctx, stmt); err != nil {
			b.db.Close()
			return nil, fmt.Errorf("baseline schema: %w", err)
		}
	}
	b.tables = newTables(MySQL, b.db, b.db, mysqlLeanSchema)
	return b, nil
}

// openMySQLPool opens a pool on dsn whose connections have the session
// settings of the library's (strict mode, READ COMMITTED, client-side
// interpolation) and count their requests into trips, MaxMySQLConns of
// them at most.
func openMySQLPool(ctx context.Context, dsn string, trips *atomic.Int64) (*sql.DB, error) {
	dsn, err := mysqlCounted(dsn, trips)
	if err != nil {
		return nil, err
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = "CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES')"
	connector, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	// READ COMMITTED, by the name the server gives the variable.
	probe := sql.OpenDB(connector)
	var v string
	err = probe.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v)
	probe.Close()
	if err != nil {
		return nil, err
	}
	isolation := "transaction_isolation"
	if strings.Contains(v, "MariaDB") {
		isolation = "tx_isolation"
	}
	cfg.Params[isolation] = "'READ-COMMITTED'"
	if connector, err = gomysql.NewConnector(cfg); err != nil {
		return nil, err
	}
	pool := sql.OpenDB(connector)
	pool.SetMaxOpenConns(MaxMySQLConns)
	pool.SetMaxIdleConns(MaxMySQLConns)
	return pool, nil
}

// Name implements Contender.
func (b *MySQLBaseline) Name() string {
	if b.style == CompleteInTransaction {
		return "sql-tx"
	}
	return "sql"
}

// Runs implements Contender: the baseline runs every workload, and its
// CompleteInTransaction style only Complete.
func (b *MySQLBaseline) Runs(w Workload) bool {
	return b.style == CompleteInOneStatement || w.Kind == Complete
}

// Submit implements Contender.
func (b *MySQLBaseline) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	h := sha256.New()
	h.Write([]byte("charge\x00psp\x00"))
	h.Write(params)
	hash := h.Sum(nil)
	res, err := b.db.ExecContext(ctx, mysqlLeanInsert, owner, key, string(params), hash)
	if err != nil {
		return "", false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", false, err
	}
	if n == 1 {
		return strconv.FormatInt(id, 10), true, nil
	}
	var stored []byte
	if err := b.db.QueryRowContext(ctx, mysqlLeanHash, id).Scan(&stored); err != nil {
		return "", false, err
	}
	if string(stored) != string(hash) {
		return "", false, fmt.Errorf("key %q is bound to another request", key)
	}
	return strconv.FormatInt(id, 10), false, nil
}

// StartRunning implements Lifecycle.
func (b *MySQLBaseline) StartRunning(ctx context.Context, jobID string) (string, error) {
	res, err := b.db.ExecContext(ctx, mysqlLeanStart, jobID, jobID)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", fmt.Errorf("job %s: no attempt started (%v)", jobID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", err
	}
	aid := strconv.FormatInt(id, 10)
	res, err = b.db.ExecContext(ctx, mysqlLeanRunning, "ref-"+aid, aid)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", fmt.Errorf("attempt %s: not marked running (%v)", aid, err)
	}
	return aid, nil
}

// Complete implements Lifecycle.
func (b *MySQLBaseline) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	if b.style == CompleteInTransaction {
		return b.completeInTx(ctx, attemptID, result)
	}
	res, err := b.db.ExecContext(ctx, mysqlLeanComplete, string(result), attemptID)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 2 {
		return err == nil, err
	}
	_, err = b.db.ExecContext(ctx, mysqlLeanLost, attemptID)
	return false, err
}

func (b *MySQLBaseline) completeInTx(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var jobID, base int64
	if err := tx.QueryRowContext(ctx, mysqlLeanAttempt, attemptID).Scan(&jobID, &base); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, mysqlLeanCAS, string(result), attemptID, jobID, base)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	state := "lost"
	if n == 1 {
		state = "succeeded"
	}
	if _, err := tx.ExecContext(ctx, mysqlLeanFinish, state, attemptID); err != nil {
		return false, err
	}
	return n == 1, tx.Commit()
}

// CountJobs implements Contender.
func (b *MySQLBaseline) CountJobs(ctx context.Context, owner string) (int, error) {
	return b.tables.CountJobs(ctx, owner)
}

// Tables implements Lifecycle.
func (b *MySQLBaseline) Tables() *Tables { return b.tables }

// RoundTrips implements Contender.
func (b *MySQLBaseline) RoundTrips() int64 { return b.trips.Load() }

// Close implements Contender.
func (b *MySQLBaseline) Close() error { return b.db.Close() }

// CloseIdleConns implements ConnWarmer.
func (b *MySQLBaseline) CloseIdleConns() { closeIdle(b.db) }

// WarmConns implements ConnWarmer.
func (b *MySQLBaseline) WarmConns(ctx context.Context, n int) error {
	return warmPool(ctx, MySQL, b.db, n)
}

// MySQLLean is the leanest hand-written Submit on MySQL, Lean's
// counterpart: the job's ID is the table's BIGINT AUTO_INCREMENT key, the
// request's hash BINARY(32), and the table has only the columns Submit
// writes (owner, idempotency_key, params, request_hash) and the unique
// index on (owner, idempotency_key). Submit is MySQLBaseline's: INSERT …
// ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), and a SELECT of the
// stored hash on a duplicate. It runs the Submit workloads that need no
// prefilled tables, on connections with MySQLBaseline's settings.
type MySQLLean struct {
	db    *sql.DB
	trips atomic.Int64
}

const (
	leanTableMySQL = `CREATE TABLE IF NOT EXISTS lean_jobs (
    id              BIGINT         NOT NULL AUTO_INCREMENT,
    owner           VARBINARY(255) NOT NULL,
    idempotency_key VARBINARY(255) NOT NULL,
    params          LONGTEXT       NOT NULL,
    request_hash    BINARY(32)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY lean_jobs_owner_key (owner, idempotency_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`
	mysqlLeanestInsert = `INSERT INTO lean_jobs (owner, idempotency_key, params, request_hash) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`
	mysqlLeanestHash = `SELECT request_hash FROM lean_jobs WHERE id = ?`
)

// OpenMySQLLean creates MySQLLean's table on db, if it is not there yet,
// and returns it.
func OpenMySQLLean(ctx context.Context, db Database) (*MySQLLean, error) {
	if db.Dialect != MySQL || db.DSN == "" {
		return nil, fmt.Errorf("OpenMySQLLean: a %s database with a DSN is needed", MySQL)
	}
	l := &MySQLLean{}
	var err error
	if l.db, err = openMySQLPool(ctx, db.DSN, &l.trips); err != nil {
		return nil, err
	}
	if _, err := l.db.ExecContext(ctx, leanTableMySQL); err != nil {
		l.db.Close()
		return nil, fmt.Errorf("lean schema: %w", err)
	}
	return l, nil
}

// Name implements Contender.
func (l *MySQLLean) Name() string { return "sql-lean" }

// Runs implements Contender: the Submit workloads without prefilled tables.
func (l *MySQLLean) Runs(w Workload) bool { return !w.NeedsTables() }

// Submit implements Contender.
func (l *MySQLLean) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	hash := leanHash(params)
	res, err := l.db.ExecContext(ctx, mysqlLeanestInsert, owner, key, string(params), hash)
	if err != nil {
		return "", false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", false, err
	}
	if n == 1 {
		return strconv.FormatInt(id, 10), true, nil
	}
	var stored []byte
	if err := l.db.QueryRowContext(ctx, mysqlLeanestHash, id).Scan(&stored); err != nil {
		return "", false, err
	}
	if string(stored) != string(hash) {
		return "", false, fmt.Errorf("key %q is bound to another request", key)
	}
	return strconv.FormatInt(id, 10), false, nil
}

// CountJobs implements Contender.
func (l *MySQLLean) CountJobs(ctx context.Context, owner string) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM lean_jobs WHERE owner = ?`, owner).Scan(&n)
	return n, err
}

// CloseIdleConns implements ConnWarmer.
func (l *MySQLLean) CloseIdleConns() { closeIdle(l.db) }

// WarmConns implements ConnWarmer.
func (l *MySQLLean) WarmConns(ctx context.Context, n int) error { return warmPool(ctx, MySQL, l.db, n) }

// RoundTrips implements Contender.
func (l *MySQLLean) RoundTrips() int64 { return l.trips.Load() }

// Close implements Contender.
func (l *MySQLLean) Close() error { return l.db.Close() }

// How the workloads prefill the two MySQL schemas: the library's and the
// lean one. fillMySQL and fillRacesMySQL read jobs to tell them apart.
var (
	mysqlLibrarySchema = schema{jobs: "intentjobs_jobs", attempts: "intentjobs_attempts", raceJobState: "running"}
	mysqlLeanSchema    = schema{jobs: "jobs", attempts: "attempts", raceJobState: "pending"}
)

// mysqlSeries is a recursive common table expression of the numbers 1 to
// ? (MySQL 8.0 and MariaDB both have them).
const mysqlSeries = `WITH RECURSIVE g (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) `

// fillMySQL is Tables.fill on MySQL: n jobs in state, for owner when
// owners is 1, else for owner followed by 0 … owners-1, with random keys
// and parameters of the size and shape of ParamsFor. Each key ends with
// its row's number: RAND() in a recursive common table expression
// repeats itself now and then on MariaDB.
func (t *Tables) fillMySQL(ctx context.Context, owner string, owners, n int, state string) error {
	conn, err := t.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Both stop a recursion at 1,000 rows unless told, each by a variable
	// of its own, which the other does not know.
	conn.ExecContext(ctx, `SET SESSION cte_max_recursion_depth = 100000000`)  // MySQL
	conn.ExecContext(ctx, `SET SESSION max_recursive_iterations = 100000000`) // MariaDB
	params := paramsTemplate.mysqlSQL()
	ownerExpr := `IF(? = 1, ?, CONCAT(?, i % ?))`
	var query string
	var args []any
	if t.s.jobs == "intentjobs_jobs" {
		query = `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
    attempt_count, reason, created_at, updated_at) ` + mysqlSeries + `
SELECT CONCAT(?, LPAD(i, 16, '0')), ` + ownerExpr + `, CONCAT(MD5(RAND()), '-', i), 'charge', 'psp', ` + params + `,
       CONCAT(MD5(RAND()), MD5(RAND())), ?, 1, 0, '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM g`
		args = []any{n, "job_00" + randomHex(4), owners, owner, owner, owners, state}
	} else {
		query = `INSERT INTO jobs (owner, idempotency_key, kind, provider, params, request_hash, state) ` + mysqlSeries + `
SELECT ` + ownerExpr + `, CONCAT(MD5(RAND()), '-', i), 'charge', 'psp', ` + params + `, UNHEX(SHA2(RAND(), 256)), ? FROM g`
		args = []any{n, owners, owner, owner, owners, state}
	}
	if _, err := conn.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("fill %d jobs: %w", n, err)
	}
	return nil
}

// fillRacesMySQL is Tables.FillRaces on MySQL.
func (t *Tables) fillRacesMySQL(ctx context.Context, owner string, n int) ([][2]string, error) {
	if err := t.fillMySQL(ctx, owner, 1, n, t.s.raceJobState); err != nil {
		return nil, err
	}
	tx, err := t.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	for seq, side := range []string{"a", "b"} {
		var err error
		if t.s.jobs == "intentjobs_jobs" {
			_, err = tx.ExecContext(ctx, `INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge,
    provider_ref, reason, created_at, updated_at, claim_token)
SELECT CONCAT('att', SUBSTR(id, 4), ?), id, ?, provider, 'running', version, ?, CONCAT('ref-', ?), '',
       UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), '' FROM intentjobs_jobs WHERE owner = ?`, side, seq+1, side == "b", side, owner)
		} else {
			_, err = tx.ExecContext(ctx, `INSERT INTO attempts (job_id, provider, state, base_version, provider_ref)
SELECT id, provider, 'running', version, CONCAT('ref-', ?) FROM jobs WHERE owner = ? ORDER BY id`, side, owner)
		}
		if err != nil {
			return nil, fmt.Errorf("fill attempts: %w", err)
		}
	}
	if t.s.jobs == "intentjobs_jobs" {
		if _, err := tx.ExecContext(ctx, `UPDATE intentjobs_jobs SET attempt_count = 2 WHERE owner = ?`, owner); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	type pair struct{ job, attempt string }
	rows, err := queryRows(ctx, t.r, `SELECT a.job_id, a.id FROM `+t.s.attempts+` a JOIN `+t.s.jobs+` j ON j.id = a.job_id
  WHERE j.owner = ? ORDER BY j.id, a.id`, func(rows *sql.Rows) (p pair, err error) {
		return p, rows.Scan(&p.job, &p.attempt)
	}, owner)
	if err != nil {
		return nil, err
	}
	if len(rows) != 2*n {
		return nil, fmt.Errorf("fill races: %d attempts, want %d", len(rows), 2*n)
	}
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{rows[2*i].attempt, rows[2*i+1].attempt}
	}
	return out, nil
}

// mysqlSQL is the template as an expression of MySQL that makes a random
// request of its shape.
func (t template) mysqlSQL() string {
	var terms []string
	for _, p := range t {
		if p.text != "" {
			terms = append(terms, `'`+strings.ReplaceAll(p.text, `'`, `''`)+`'`)
		}
		switch p.hole {
		case hexHole:
			terms = append(terms, `MD5(RAND())`)
		case numHole:
			terms = append(terms, `FLOOR(RAND() * 100000)`)
		}
	}
	return `CONCAT(` + strings.Join(terms, ", ") + `)`
}

// rebindMySQL turns a query of Tables, written with $n placeholders each
// used once and in order, and PostgreSQL's CAST(… AS text), into MySQL's
// form.
func rebindMySQL(query string) string {
	return strings.ReplaceAll(placeholder.ReplaceAllString(query, "?"), "AS text)", "AS CHAR)")
}
