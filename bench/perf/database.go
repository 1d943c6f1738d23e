// Package perf holds the benchmark workloads of jobs: the contenders (the
// library, and the SQL a competent engineer would hand-write for the same
// work on a lean schema of its own), the databases they run in (each
// contender in a PostgreSQL schema or a SQLite file of its own, with the same
// connection settings), the requests they are given, and the workloads
// themselves, with their correctness checks. This package's Go benchmarks
// (go test -bench) and the report command (cmd/report) both run them.
package perf

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The dialects.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// MaxPostgresConns bounds every PostgreSQL pool of a benchmark.
const MaxPostgresConns = 10

// ConnWarmer is a contender whose PostgreSQL connections are opened ahead
// of a trial and closed after it. A report runs many contenders, one at a
// time, each with a pool of MaxPostgresConns: pools that kept their
// connections between trials would reach the server's limit. Prepare opens
// as many as the trial has goroutines, untimed; a report closes them once
// the trial is checked.
type ConnWarmer interface {
	WarmConns(ctx context.Context, n int) error
	CloseIdleConns()
}

// closeIdle closes the idle connections of db's pool.
func closeIdle(db *sql.DB) {
	db.SetMaxIdleConns(0)
	db.SetMaxIdleConns(MaxPostgresConns)
}

// warmPool opens up to n connections of db's pool, on PostgreSQL and
// MySQL, and returns them to it.
func warmPool(ctx context.Context, dialect string, db *sql.DB, n int) error {
	if dialect == SQLite {
		return nil
	}
	n = min(n, MaxPostgresConns)
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if err := c.PingContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Database is where one contender keeps its tables, and how it connects.
// Every contender of a comparison gets a Database of its own, so that none
// pays for another's schema (its triggers, indexes and rows), and the same
// settings, so that the comparison measures the code and not the settings.
type Database struct {
	Dialect string // Postgres or SQLite
	// DSN is, on PostgreSQL, a connection string whose search_path names a
	// schema of the contender's own; on SQLite, the path of a file of its
	// own (without parameters).
	DSN string
	// Synchronous is SQLite's synchronous setting for every connection:
	// "FULL" (what jobs.OpenSQLite uses) or "NORMAL".
	Synchronous string
	// AlterLibrary, if set, is SQL that OpenLibrary runs on the library's
	// schema once it is applied (on SQLite, on the writer connection, so
	// that a PRAGMA holds for every write): an ablation, to measure what a
	// part of the schema costs by taking it away. Other contenders ignore
	// it.
	AlterLibrary string
}

// SQLiteParams are the connection settings of jobs.OpenSQLite, with the
// given synchronous setting: WAL, a busy timeout, immediate transactions,
// foreign keys and a statement cache. Every contender on SQLite opens its
// file with them. The setting is passed as _sync: the driver takes the
// first _synchronous of a DSN, and jobs.OpenSQLite puts its own first, so
// that a _synchronous added to its DSN is ignored, while _sync wins over it.
func SQLiteParams(synchronous string) string {
	return "_journal_mode=WAL&_sync=" + synchronous +
		"&_busy_timeout=5000&_foreign_keys=on&_txlock=immediate&_stmt_cache_size=32"
}

// sqliteWriterParams are what jobs.OpenSQLite adds on its writer
// connection: a page cache of up to 32 MiB.
const sqliteWriterParams = "&_cache_size=-32768"

// sqliteSynchronous are the values of PRAGMA synchronous.
var sqliteSynchronous = map[string]int{"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}

func (d Database) validate() error {
	switch d.Dialect {
	case Postgres:
	case SQLite:
		if d.Synchronous != "FULL" && d.Synchronous != "NORMAL" {
			return fmt.Errorf("sqlite: synchronous %q: want FULL or NORMAL", d.Synchronous)
		}
	default:
		return fmt.Errorf("dialect %q: want %s or %s", d.Dialect, Postgres, SQLite)
	}
	if d.DSN == "" {
		return fmt.Errorf("%s: no DSN", d.Dialect)
	}
	return nil
}

// CheckSynchronous verifies that db's connection commits with the
// synchronous setting asked for ("FULL" or "NORMAL").
func CheckSynchronous(ctx context.Context, db *sql.DB, want string) error {
	var got int
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&got); err != nil {
		return err
	}
	if got != sqliteSynchronous[want] {
		return fmt.Errorf("sqlite: synchronous is %d, want %d (%s)", got, sqliteSynchronous[want], want)
	}
	return nil
}

// openSQLiteReader opens a pool of readers on a SQLite file with the
// settings of jobs.OpenSQLite, sized as it sizes its own.
func openSQLiteReader(path, synchronous string) (*sql.DB, error) {
	r, err := sql.Open("sqlite3", path+"?"+SQLiteParams(synchronous))
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return r, nil
}

// openSQLiteWriter opens the single writer connection of a SQLite file,
// as jobs.OpenSQLite does.
func openSQLiteWriter(ctx context.Context, path, synchronous string) (*sql.DB, error) {
	w, err := sql.Open("sqlite3", path+"?"+SQLiteParams(synchronous)+sqliteWriterParams)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := CheckSynchronous(ctx, w, synchronous); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// openPostgres opens a pool through pgx's database/sql driver, as
// jobs.OpenPostgres does, with a dialer that counts round trips into trips.
func openPostgres(dsn string, trips *atomic.Int64) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &CountingConn{Conn: c, N: trips}, nil
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(MaxPostgresConns)
	db.SetMaxIdleConns(MaxPostgresConns)
	return db, nil
}

// CountingConn counts the requests a PostgreSQL client sends: pgx writes
// each request, with all its protocol messages, in one write and then waits
// for the answer, so the number of writes is the number of round trips.
type CountingConn struct {
	net.Conn
	N *atomic.Int64
}

func (c *CountingConn) Write(b []byte) (int, error) {
	c.N.Add(1)
	return c.Conn.Write(b)
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// rebind turns a query written with $n placeholders into the dialect's form.
func rebind(dialect, query string) string {
	switch dialect {
	case SQLite:
		return placeholder.ReplaceAllString(query, "?$1")
	case MySQL:
		return rebindMySQL(query)
	}
	return query
}

// version describes the database server or library behind db.
func version(ctx context.Context, dialect string, db *sql.DB) string {
	var v string
	q := `SELECT 'SQLite ' || sqlite_version()`
	switch dialect {
	case Postgres:
		q = `SELECT 'PostgreSQL ' || current_setting('server_version')`
	case MySQL:
		q = `SELECT CONCAT(IF(VERSION() LIKE '%MariaDB%', 'MariaDB ', 'MySQL '), VERSION())`
	}
	if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "unknown"
	}
	return v
}

// newID returns prefix and 32 hex digits: microseconds, then randomness,
// as the library's IDs are made.
func newID(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMicro()))
	rand.Read(b[8:])
	return prefix + hex.EncodeToString(b[:])
}

// NewKey returns a random idempotency key, as a client would make one.
func NewKey() string { return randomHex(16) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// closeAll closes dbs and returns the first error.
func closeAll(dbs ...*sql.DB) error {
	var first error
	for _, db := range dbs {
		if db == nil {
			continue
		}
		if err := db.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
