//go:build cgo

package jobs

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// sqliteParams are the connection settings OpenSQLite uses:
//   - WAL, so that readers never block the writer and the writer never blocks readers;
//   - synchronous=FULL, so that a committed job survives a power cut (a job
//     lost after its provider was called would be charged again on retry);
//   - immediate transactions, so that a transaction takes the write lock at
//     BEGIN, where waiting is safe, instead of failing at its first write;
//   - foreign keys, so that attempts cannot outlive their job;
//   - a cache of prepared statements per connection, so that the store's
//     queries are compiled once per connection instead of on every call
//     (compiling them was a quarter of Submit's CPU time).
//
// and a busy timeout: short on the writer connection, whose writes have
// waited their turn in the write queue before they ask SQLite for its lock
// (it is busy then only for a writer that does not queue, and the store's
// retries, which keep the turn, poll for it every few milliseconds), and
// long on readers, which WAL never blocks but for a moment in recovery.
const (
	sqliteParams       = "_journal_mode=WAL&_synchronous=FULL&_foreign_keys=on&_txlock=immediate&_stmt_cache_size=32"
	sqliteWriterParams = sqliteParams + "&_busy_timeout=20"
	sqliteReaderParams = sqliteParams + "&_busy_timeout=5000"
)

// OpenSQLite opens (creating if needed) the SQLite database at dsn, a file
// path or a "file:" URI, and applies the schema. Writes go through one
// connection, reads through a pool. Writers wait for their turn in a queue:
// the goroutines of the store first come, first served, then one writer of
// each store, in this process and in others, through an exclusive flock(2)
// on a file next to the database, the database's name followed by "-lock"
// (created on open, and safe to delete when no store has the database
// open). Writes therefore never poll for SQLite's lock against each other,
// and a writer that still finds SQLite busy (another program writing) is
// retried until ctx ends. ":memory:" gives a private in-memory database on
// a single connection. Where flock(2) is missing (Windows), only the
// goroutines of a store queue, and other writers are waited for by the
// busy timeout and retries.
func OpenSQLite(ctx context.Context, dsn string, opts ...StoreOption) (*SQLStore, error) {
	path, query, _ := strings.Cut(dsn, "?")
	file, memory, readOnly := sqliteFile(path, query)
	dsnWith := func(params string) string {
		if query != "" {
			params += "&" + query
		}
		return path + "?" + params
	}
	var queue *writeQueue
	switch {
	case memory || !fileLocks:
		queue = newWriteQueue("")
	case !readOnly:
		queue = newWriteQueue(sqliteLockPath(file))
		if err := queue.create(); err != nil {
			return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: err.Error()}
		}
	}
	w, err := sql.Open("sqlite3", dsnWith(sqliteWriterParams))
	if err != nil {
		return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: err.Error()}
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r := w
	if !memory {
		if r, err = sql.Open("sqlite3", dsnWith(sqliteReaderParams)); err != nil {
			w.Close()
			return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: err.Error()}
		}
		n := max(4, runtime.GOMAXPROCS(0))
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
	}
	s := newSQLStore(sqliteDialect, w, r)
	s.queue = queue
	s.owned = append(s.owned, w)
	if r != w {
		s.owned = append(s.owned, r)
	}
	if err := s.init(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sqliteFile reads the database file's name out of the part of a DSN before
// "?" (a path, or a "file:" URI) and its query, and reports whether the
// database lives in memory (":memory:", mode=memory, or "", a temporary
// database private to each connection) or is opened read-only (mode=ro,
// immutable=1).
func sqliteFile(path, query string) (file string, memory, readOnly bool) {
	file = path
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		rest, _, _ = strings.Cut(rest, "#")
		if after, ok := strings.CutPrefix(rest, "//"); ok {
			// file://host/path: the host is empty or "localhost".
			_, p, _ := strings.Cut(after, "/")
			rest = "/" + p
		}
		if unescaped, err := url.PathUnescape(rest); err == nil {
			rest = unescaped
		}
		file = rest
	}
	params, _ := url.ParseQuery(query)
	memory = file == "" || file == ":memory:" || params.Get("mode") == "memory"
	readOnly = params.Get("mode") == "ro" || params.Get("immutable") == "1"
	return file, memory, readOnly
}

// sqliteLockPath is the lock file of the write queue of the database file
// at file: next to the file the name resolves to, so that every name of a
// database (through a symbolic link, say) finds the same lock.
func sqliteLockPath(file string) string {
	if real, err := filepath.EvalSymlinks(file); err == nil {
		file = real
	}
	return file + "-lock"
}

// NewSQLiteStore returns a store over the caller's SQLite database, opened
// with the "sqlite3" driver of github.com/mattn/go-sqlite3, and applies the
// schema. The caller keeps ownership of db. Open it with a busy timeout
// (_busy_timeout=5000) and, for several goroutines, WAL (_journal_mode=WAL);
// OpenSQLite does all of that for you. Writes through such a store do not
// queue for the write lock as OpenSQLite's do: they wait by the busy timeout
// and retries, so where several processes write one file, open it with
// OpenSQLite in all of them.
func NewSQLiteStore(ctx context.Context, db *sql.DB, opts ...StoreOption) (*SQLStore, error) {
	s := newSQLStore(sqliteDialect, db, nil)
	if err := s.init(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// NewSQLiteStoreSQLX is NewSQLiteStore for an *sqlx.DB.
func NewSQLiteStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...StoreOption) (*SQLStore, error) {
	return NewSQLiteStore(ctx, db.DB, opts...)
}

var sqliteDialect = &dialect{
	name:         "sqlite",
	rebind:       sqliteRebindCached,
	ts:           func(t time.Time) any { return t.UnixMicro() },
	interpret:    interpretSQLite,
	retry:        sqliteBusy,
	writeLock:    true,
	beginMigrate: "BEGIN IMMEDIATE",
	beginWrite:   "BEGIN IMMEDIATE",

	createJob: sqliteRebind(`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING ` + jobCols + `, 1`),

	openJob: sqliteRebind(`UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $3
    ` + openJobGuard + `
    RETURNING version, attempt_count, COALESCE(NULLIF($2, ''), provider)`),

	insertAttempt: sqliteRebind(`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
    VALUES ($1, $2, $3, $4, 'starting', $5, $6, $7, $7)
    RETURNING ` + attemptCols),

	updateJobCAS: sqliteRebind(`UPDATE jobs SET state = 'succeeded', result = $3, completed_by = $4, version = version + 1,
                    updated_at = $5, closed_at = $5
     WHERE id = $1 AND version = $2 AND completed_by IS NULL AND state = 'running'
    RETURNING ` + jobCols),
}

// sqliteRebind turns $1, $2, … into ?1, ?2, …: numbered, so that a
// parameter can appear twice and in any order.
func sqliteRebind(q string) string { return placeholder.ReplaceAllString(q, "?$1") }

var sqliteQueries sync.Map // query text with $n → with ?n

func sqliteRebindCached(q string) string {
	if r, ok := sqliteQueries.Load(q); ok {
		return r.(string)
	}
	r := sqliteRebind(q)
	sqliteQueries.Store(q, r)
	return r
}

// sqliteBusy reports whether err is SQLite's "database is locked": the
// statement did not run and can be run again.
func sqliteBusy(err error) bool {
	var se *StorageError
	if errors.As(err, &se) {
		return se.Kind == StorageBusy
	}
	var e sqlite3.Error
	return errors.As(err, &e) && (e.Code == sqlite3.ErrBusy || e.Code == sqlite3.ErrLocked)
}

// interpretSQLite maps go-sqlite3 errors to this package's errors.
func interpretSQLite(op string, err error) error {
	if err, ok := passThrough(op, err); ok {
		return err
	}
	var e sqlite3.Error
	if !errors.As(err, &e) {
		return &StorageError{Op: op, Kind: StorageOther, Message: err.Error()}
	}
	msg := e.Error()
	if e.ExtendedCode == sqlite3.ErrConstraintUnique || e.ExtendedCode == sqlite3.ErrConstraintPrimaryKey {
		switch {
		case strings.Contains(msg, "jobs.owner, jobs.idempotency_key"):
			return errUniqueKey
		case strings.Contains(msg, "job_attempts.job_id") && !strings.Contains(msg, "seq"):
			return errUniqueInDoubt
		}
	}
	kind := StorageOther
	switch e.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		kind = StorageBusy
	case sqlite3.ErrFull:
		kind = StorageFull
	case sqlite3.ErrReadonly:
		kind = StorageReadOnly
	case sqlite3.ErrCantOpen, sqlite3.ErrIoErr, sqlite3.ErrNotADB:
		kind = StorageUnavailable
	}
	if e.Code == sqlite3.ErrError && strings.Contains(msg, "no such table") {
		kind = StorageSchema
	}
	// The extended code's number: its text is the primary code's, so that
	// SQLITE_BUSY_SNAPSHOT (517) would read like SQLITE_BUSY (5).
	return &StorageError{Op: op, Kind: kind, Code: strconv.Itoa(int(e.ExtendedCode)), Message: msg}
}
