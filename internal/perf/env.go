// Package perf holds the benchmark workloads of jobs: the environments they
// run in (a SQLite file or a PostgreSQL schema, opened exactly as the
// library's constructors open them), the contenders (the library and a
// hand-written SQL baseline on the same tables) and the workloads
// themselves, with their correctness checks. The root package's benchmarks
// and the report command of the bench module both run them.
package perf

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/intentjobs/jobs"
)

// SQLiteParams are the connection settings of jobs.OpenSQLite: WAL,
// synchronous=FULL, a busy timeout, immediate transactions and foreign keys.
// Baselines and peers open SQLite with them too, or the comparison would
// measure the settings instead of the code.
const SQLiteParams = "_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000&_foreign_keys=on&_txlock=immediate&_stmt_cache_size=32"

// MaxPostgresConns bounds every PostgreSQL pool of a benchmark.
const MaxPostgresConns = 10

// Env is one database with the jobs schema, as a store and as the raw
// handles the baseline writes through.
type Env struct {
	Dialect string // "sqlite" or "postgres"
	Store   *jobs.SQLStore
	// Writes is the store's own write handle: on SQLite its single writer
	// connection, on PostgreSQL its pool.
	Writes *sql.DB
	// Reads is a pool for reads: on SQLite a second pool with the store's
	// settings, as OpenSQLite keeps one; on PostgreSQL the same pool.
	Reads *sql.DB
	// DSN opens the same database again: the SQLite file path (without
	// parameters) or the PostgreSQL connection string.
	DSN string

	roundTrips atomic.Int64
	closers    []func() error
}

// OpenSQLite creates a jobs database in a new file in dir, opened with
// jobs.OpenSQLite.
func OpenSQLite(ctx context.Context, dir string) (*Env, error) {
	path := filepath.Join(dir, "jobs-bench.db")
	s, err := jobs.OpenSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	r, err := sql.Open("sqlite3", path+"?"+SQLiteParams)
	if err != nil {
		s.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	e := &Env{Dialect: "sqlite", Store: s, Writes: s.DB(), Reads: r, DSN: path}
	e.closers = append(e.closers, r.Close, s.Close)
	return e, nil
}

// OpenPostgres opens a jobs store on dsn (which should name a schema of
// its own in search_path) through pgx's database/sql driver, as
// jobs.OpenPostgres does, with a dialer that counts round trips.
func OpenPostgres(ctx context.Context, dsn string) (*Env, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	e := &Env{Dialect: "postgres", DSN: dsn}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: &e.roundTrips}, nil
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(MaxPostgresConns)
	db.SetMaxIdleConns(MaxPostgresConns)
	s, err := jobs.NewPostgresStore(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	e.Store, e.Writes, e.Reads = s, db, db
	e.closers = append(e.closers, db.Close)
	return e, nil
}

// Close closes the handles the Env opened.
func (e *Env) Close() error {
	var first error
	for _, c := range e.closers {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// RoundTrips returns how many requests the client has sent to PostgreSQL
// so far (0 on SQLite). pgx writes each request, with all its protocol
// messages, in one write and then waits for the answer, so the number of
// writes is the number of round trips.
func (e *Env) RoundTrips() int64 { return e.roundTrips.Load() }

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

// q turns a query written with $n placeholders into the dialect's form.
func (e *Env) q(query string) string {
	if e.Dialect == "sqlite" {
		return placeholder.ReplaceAllString(query, "?$1")
	}
	return query
}

// ts is a time as the dialect stores it.
func (e *Env) ts(t time.Time) any {
	if e.Dialect == "sqlite" {
		return t.UnixMicro()
	}
	return t
}

// Fill inserts n pending jobs for owner with set-based SQL (generate_series
// on PostgreSQL, a recursive common table expression on SQLite), with random
// keys and IDs that sort before the library's own, and returns their IDs'
// common prefix. Prefilling a million jobs takes seconds, not a Go loop.
func (e *Env) Fill(ctx context.Context, owner string, n int, state string) (prefix string, err error) {
	prefix = "job_00" + randomHex(4)
	now := time.Now().UTC()
	var query string
	switch e.Dialect {
	case "postgres":
		query = `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
                  attempt_count, created_at, updated_at)
SELECT $1 || lpad(g::text, 16, '0'), $2, md5($1 || g::text), 'charge', 'psp', '{"amount":1200,"currency":"eur"}',
       md5(g::text) || md5($1), $4, 1, 0, $5, $5
  FROM generate_series(1, $3::int) AS g`
	default:
		query = `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $3)
INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
                  attempt_count, created_at, updated_at)
SELECT $1 || printf('%016d', i), $2, lower(hex(randomblob(16))), 'charge', 'psp', '{"amount":1200,"currency":"eur"}',
       lower(hex(randomblob(32))), $4, 1, 0, $5, $5
  FROM g`
	}
	if _, err := e.Writes.ExecContext(ctx, e.q(query), prefix, owner, n, state, e.ts(now)); err != nil {
		return "", fmt.Errorf("fill %d jobs: %w", n, err)
	}
	return prefix, nil
}

// FillRaces inserts n running jobs for owner, each with two running
// attempts (a hedge) started at version 1, ready for two Completes to race.
// It returns the attempts' IDs in pairs.
func (e *Env) FillRaces(ctx context.Context, owner string, n int) ([][2]string, error) {
	if _, err := e.Fill(ctx, owner, n, "running"); err != nil {
		return nil, err
	}
	tx, err := e.Writes.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := e.ts(time.Now().UTC())
	if _, err := tx.ExecContext(ctx, e.q(`UPDATE jobs SET attempt_count = 2 WHERE owner = $1`), owner); err != nil {
		return nil, err
	}
	for i, suffix := range []string{"a", "b"} {
		_, err := tx.ExecContext(ctx, e.q(`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version,
        hedge, provider_ref, created_at, updated_at)
SELECT 'att' || substr(id, 4) || $2, id, $3, provider, 'running', 1, $4, 'ref-' || $2, $5, $5
  FROM jobs WHERE owner = $1`), owner, suffix, i+1, i == 1, now)
		if err != nil {
			return nil, fmt.Errorf("fill attempts: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	ids, err := e.jobIDs(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([][2]string, len(ids))
	for i, id := range ids {
		out[i] = [2]string{"att" + id[3:] + "a", "att" + id[3:] + "b"}
	}
	return out, nil
}

// jobIDs returns the IDs of owner's jobs in ID order.
func (e *Env) jobIDs(ctx context.Context, owner string) ([]string, error) {
	rows, err := e.Reads.QueryContext(ctx, e.q(`SELECT id FROM jobs WHERE owner = $1 ORDER BY id`), owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// CountJobs returns how many jobs the database holds.
func (e *Env) CountJobs(ctx context.Context) (int, error) {
	var n int
	err := e.Reads.QueryRowContext(ctx, `SELECT count(*) FROM jobs`).Scan(&n)
	return n, err
}

// FillTo brings the database to at least n stored jobs, then refreshes the
// planner's statistics.
func (e *Env) FillTo(ctx context.Context, n int) error {
	have, err := e.CountJobs(ctx)
	if err != nil {
		return err
	}
	if have < n {
		if e.Dialect == "sqlite" {
			// Random keys into a large unique index: give the writer's
			// page cache room while filling, then restore the default
			// (-2000: about 2 MB), which is what the store runs with.
			if _, err := e.Writes.ExecContext(ctx, `PRAGMA cache_size = -262144`); err != nil {
				return err
			}
			defer e.Writes.ExecContext(context.WithoutCancel(ctx), `PRAGMA cache_size = -2000`)
		}
		if _, err := e.Fill(ctx, "fill-"+randomHex(4), n-have, "pending"); err != nil {
			return err
		}
	}
	if e.Dialect == "postgres" {
		_, err = e.Writes.ExecContext(ctx, `ANALYZE jobs`)
	} else {
		_, err = e.Writes.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return err
}

// Version describes the database server or library.
func (e *Env) Version(ctx context.Context) string {
	var v string
	q := `SELECT 'SQLite ' || sqlite_version()`
	if e.Dialect == "postgres" {
		q = `SELECT current_setting('server_version')`
	}
	if err := e.Reads.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "unknown"
	}
	if e.Dialect == "postgres" {
		v = "PostgreSQL " + v
	}
	return v
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
