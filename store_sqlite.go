package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// SQLiteStore is the Store on SQLite. SQLite has one write lock for the
// whole database, so every write is one immediate transaction (BEGIN
// IMMEDIATE takes the lock first) or one statement, and nothing else writes
// while it runs: what a write reads is what it changes. Reads go through a
// pool of their own and never wait for writes (WAL). Writers queue for the
// lock instead of polling SQLite for it (see writeQueue).
//
// This file holds everything the store does: opening and settings, the
// write queue, every statement, error mapping and purge. The driver is
// mattn/go-sqlite3 (cgo) for OpenSQLite; NewSQLiteStore takes a database
// opened with any SQLite driver for database/sql, errors being read by
// SQLite's result codes.
type SQLiteStore struct {
	sqlHandles
	queue       *writeQueue         // OpenSQLite's files: writers wait here for their turn
	line        txLine              // inTx's transactions waiting in queue, committed together
	onBatch     func(n int)         // tests: called with the size of every batch of line before it runs
	onWriteWait func(time.Duration) // see ObserveWriteWait
	// shortBusy: the writer connection waits for SQLite's lock no longer
	// than sqliteWriterBusyTimeout (OpenSQLite, unless the DSN sets a busy
	// timeout of its own), so that a statement of UpdateAttempt may run
	// without ctx's cancellation (see UpdateAttempt).
	shortBusy bool

	creatingMu sync.Mutex
	creating   map[ownerKey]*creation // CreateJob's writes under way, by owner and key
	keys       keyStreak              // CreateJob's recent keys: new ones in a row
}

// ownerKey is a job's owner and key.
type ownerKey struct{ owner, key string }

// creation is a CreateJob's write under way, which concurrent calls with
// the same owner and key wait for instead of writing too.
type creation struct {
	done    chan struct{} // closed when job and err are set
	waiters int           // calls waiting for it (under SQLiteStore.creatingMu)
	job     Job
	err     error
}

// sqliteSettings are the connection settings OpenSQLite uses, unless the
// DSN sets them itself:
//   - WAL, so that readers never block the writer and the writer never
//     blocks readers;
//   - synchronous=FULL, so that a committed job survives a power cut (a job
//     lost after its provider was called would be charged again on retry);
//   - immediate transactions, so that a transaction of the caller's on the
//     store's handles takes the write lock at BEGIN, where waiting is safe,
//     instead of failing at its first write;
//   - foreign keys, so that attempts cannot outlive their job;
//   - a cache of prepared statements per connection, so that statements
//     are compiled once per connection instead of on every call;
//   - a busy timeout: short on the writer connection, whose writes have
//     waited their turn in the write queue before they ask SQLite for its
//     lock (it is busy then only for a writer that does not queue, and the
//     store's retries, which keep the turn, poll for it every few
//     milliseconds), and long on readers, which WAL never blocks but for a
//     moment in recovery;
//   - on the writer connection, a page cache of up to 32 MiB (SQLite's
//     default is 2 MB, and the cache takes memory only as it fills). Every
//     new job is inserted into the unique index of (owner, key), at a place
//     its random key decides: with a million jobs that index is tens of
//     megabytes, and a 2 MB cache reads most of its leaf pages back from
//     the file, inside the write lock (README, Performance).
//
// Each is a go-sqlite3 DSN parameter; the second name is its alias, which
// a DSN may use instead. A DSN that sets one sets it for every connection.
var sqliteSettings = []sqliteSetting{
	{"_journal_mode", "_journal", "WAL"},
	{"_synchronous", "_sync", "FULL"},
	{"_foreign_keys", "_fk", "on"},
	{"_txlock", "", "immediate"},
	{"_stmt_cache_size", "", "32"},
}

type sqliteSetting struct{ name, alias, value string }

// The settings of one connection role or the other.
var (
	sqliteWriterSettings = []sqliteSetting{{"_busy_timeout", "_timeout", "20"}, {"_cache_size", "", "-32768"}}
	sqliteReaderSettings = []sqliteSetting{{"_busy_timeout", "_timeout", "5000"}}
)

// OpenSQLite opens (creating if needed) the SQLite database at dsn, a file
// path or a "file:" URI, and applies the schema. The DSN's own parameters
// (go-sqlite3's, e.g. "?_synchronous=NORMAL") take precedence over the
// store's settings (sqliteSettings). Writes go through one connection,
// reads through a pool. Writers wait for their turn in a queue: the
// goroutines of the store first come, first served, then one writer of
// each store, in this process and in others, through an exclusive
// flock(2) on a file next to the database, the database's name followed by
// "-lock" (created on open, and safe to delete when no store has the
// database open). Writes therefore never poll for SQLite's lock against
// each other, and a writer that still finds SQLite busy (another program
// writing) is retried until ctx ends. ":memory:" gives a private in-memory
// database on a single connection. Where flock(2) is missing (Windows),
// only the goroutines of a store queue, and other writers are waited for by
// the busy timeout and retries.
//
// OpenSQLite needs cgo (the driver is mattn/go-sqlite3); built without it,
// it returns an error, and NewSQLiteStore serves a database opened with a
// pure-Go driver.
// Built with cgo, the package sets SQLite's page caches to allocate no
// pages up front, process-wide, when it loads (see store_sqlite_cgo.go).
func OpenSQLite(ctx context.Context, dsn string, opts ...StoreOption) (*SQLiteStore, error) {
	if sqliteDriverName == "" {
		return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: "OpenSQLite needs cgo " +
			"(github.com/mattn/go-sqlite3): build with CGO_ENABLED=1, or open the database with a pure-Go " +
			"SQLite driver and pass it to NewSQLiteStore"}
	}
	path, query, _ := strings.Cut(dsn, "?")
	user, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalid("dsn", "parameters: %v", err)
	}
	file, memory, readOnly := sqliteFile(path, user)
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
	w, err := sql.Open(sqliteDriverName, sqliteDSN(path, query, user, sqliteWriterSettings))
	if err != nil {
		return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: err.Error()}
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r := w
	if !memory {
		if r, err = sql.Open(sqliteDriverName, sqliteDSN(path, query, user, sqliteReaderSettings)); err != nil {
			w.Close()
			return nil, &StorageError{Op: "open sqlite", Kind: StorageUnavailable, Message: err.Error()}
		}
		n := max(4, runtime.GOMAXPROCS(0))
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
	}
	s := &SQLiteStore{sqlHandles: sqlHandles{db: w, rdb: r, owned: []*sql.DB{w}}, queue: queue,
		shortBusy: !user.Has("_busy_timeout") && !user.Has("_timeout")}
	if r != w {
		s.owned = append(s.owned, r)
	}
	if err := s.open(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// sqliteDSN is the DSN of the path and query a caller gave, with the
// store's settings and those of the connection's role added where the
// query does not set them.
func sqliteDSN(path, query string, user url.Values, role []sqliteSetting) string {
	var add []string
	for _, p := range slices.Concat(sqliteSettings, role) {
		if !user.Has(p.name) && (p.alias == "" || !user.Has(p.alias)) {
			add = append(add, p.name+"="+p.value)
		}
	}
	if query != "" {
		add = append(add, query)
	}
	return path + "?" + strings.Join(add, "&")
}

// sqliteFile reads the database file's name out of the part of a DSN before
// "?" (a path, or a "file:" URI), and reports whether the database lives
// in memory (":memory:", mode=memory, or "", a temporary database private
// to each connection) or is opened read-only (mode=ro, immutable=1).
func sqliteFile(path string, params url.Values) (file string, memory, readOnly bool) {
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

// NewSQLiteStore returns a store over the caller's SQLite database and
// applies the schema. The caller keeps ownership of db. Any database/sql
// driver for SQLite serves: mattn/go-sqlite3, or a pure-Go one such as
// modernc.org/sqlite for builds without cgo. Open it with a busy timeout
// and, for several goroutines, WAL; OpenSQLite does all of that for you.
// Writes through such a store do not queue for the write lock as
// OpenSQLite's do: they wait by the busy timeout and retries, so where
// several processes write one file, open it with OpenSQLite in all of
// them.
func NewSQLiteStore(ctx context.Context, db *sql.DB, opts ...StoreOption) (*SQLiteStore, error) {
	s := &SQLiteStore{sqlHandles: sqlHandles{db: db, rdb: db}}
	if err := s.open(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// NewSQLiteStoreSQLX is NewSQLiteStore for an *sqlx.DB.
func NewSQLiteStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...StoreOption) (*SQLiteStore, error) {
	return NewSQLiteStore(ctx, db.DB, opts...)
}

func (s *SQLiteStore) open(ctx context.Context, opts []StoreOption) error {
	cfg := readOptions(opts)
	if cfg.listenDSN != nil {
		return invalid("ListenDSN", "only the PostgreSQL store listens")
	}
	s.onWriteWait = cfg.onWriteWait
	return checkSchema(ctx, s, cfg, s.migrate)
}

// Dialect returns "sqlite".
func (s *SQLiteStore) Dialect() string { return "sqlite" }

// Close closes the database handles the store opened itself. Handles
// passed in by the caller are left open.
func (s *SQLiteStore) Close() error { return errors.Join(s.closeOwned(), s.queue.close()) }

// migrateBusyBudget bounds how long the migration retries a database that
// stays busy, when ctx has no deadline of its own.
const migrateBusyBudget = 30 * time.Second

// migrate applies the schema in one immediate transaction, in its turn in
// the write queue like any write. The first connections to a new file race
// to convert it to WAL, and SQLite answers that conversion with "database
// is locked" at once, without waiting for its busy timeout; so a busy
// migration, which has written nothing, is tried again, for up to
// migrateBusyBudget.
func (s *SQLiteStore) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, migrateBusyBudget)
	defer cancel()
	return s.write(ctx, "migrate", func(func()) error {
		return migrate(ctx, s.db, s, migrationPlan{
			dialect: "sqlite",
			begin:   "BEGIN IMMEDIATE",
		})
	})
}

// DatabaseSchemaVersion implements SQLStore.
func (s *SQLiteStore) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.rdb, s)
}

// AppliedMigrations implements SQLStore.
func (s *SQLiteStore) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	return appliedMigrations(ctx, s.rdb, s)
}

// The statements, in the order of the methods below. Times are Unix
// microseconds; parameters are numbered (?1, ?2, …), so that one can appear
// twice.
//
// SQLite evaluates an IN list of three or more values, constants or
// parameters, through a transient table it builds for each execution, and
// a RETURNING clause through another: each costs a page cache of its own
// and several allocations. The statements of the hot paths therefore spell
// such lists as comparisons joined by OR, and write without RETURNING where
// the store knows what it wrote. The schema does the same in its CHECK
// constraints and partial indexes (migration 0004), which every insert and
// update evaluates.
const (
	// CreateJob's insert writes nothing for a key that is taken; the job
	// it writes is the one given, so it returns nothing.
	sqliteCreateJob = `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', 1, ?8, ?8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING`

	sqliteJobByID   = `SELECT ` + jobCols + ` FROM jobs WHERE id = ?1`
	sqliteJobByKey  = `SELECT ` + jobCols + ` FROM jobs WHERE owner = ?1 AND idempotency_key = ?2`
	sqliteJobExists = `SELECT 1 FROM jobs WHERE id = ?1`

	// CloseJob fails or cancels an open job; with ?5 (fail), only while no
	// attempt is open. The write lock makes the guard exact.
	sqliteCloseJob = `UPDATE jobs SET state = ?2, version = version + 1, reason = ?3, updated_at = ?4, closed_at = ?4
    WHERE id = ?1 AND state IN ('pending', 'running')
      AND (NOT ?5 OR NOT EXISTS (SELECT 1 FROM job_attempts a
                                 WHERE a.job_id = ?1 AND (a.state = 'starting' OR a.state = 'running' OR a.state = 'unknown')))
    RETURNING ` + jobCols

	sqliteAttemptByID = `SELECT ` + attemptCols + ` FROM job_attempts WHERE id = ?1`
	sqliteAttempts    = `SELECT ` + attemptCols + ` FROM job_attempts WHERE job_id = ?1 ORDER BY seq`

	// StartAttempt's guard and count on the job row: the job must be open
	// and no attempt may be in doubt (nor running, unless ?4 allows a
	// hedge). It returns what the attempt's insert needs.
	sqliteOpenJob = `UPDATE jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = ?3
    WHERE id = ?1 AND state IN ('pending', 'running')
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                      WHERE a.job_id = ?1
                        AND (a.state IN ('starting', 'unknown') OR (a.state = 'running' AND NOT ?4)))
    RETURNING version, attempt_count, COALESCE(NULLIF(?2, ''), provider)`

	// The attempt it inserts is known from its arguments: it returns
	// nothing.
	sqliteInsertAttempt = `INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, 'starting', ?5, ?6, ?7, ?7)`

	sqliteBlocker = `SELECT id, state FROM job_attempts
    WHERE job_id = ?1 AND (state = 'starting' OR state = 'unknown' OR state = 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	sqliteOtherInDoubt = `SELECT id, state FROM job_attempts
    WHERE job_id = ?1 AND id <> ?2 AND state IN ('starting', 'unknown') LIMIT 1`

	// UpdateAttempt: as pgUpdateAttempt in store_postgres.go, but it
	// returns only the columns the update does not set: the rest (the ID,
	// the state, the times, a reference or reason given) are the call's
	// own, and '' stands for a reference or reason the call sets. (An open
	// attempt has no finished_at: job_attempts_finished_check.)
	sqliteUpdateAttempt = `UPDATE job_attempts SET
        state        = ?2,
        provider_ref = CASE WHEN ?3 = '' THEN provider_ref ELSE ?3 END,
        reason       = CASE WHEN ?4 = '' THEN reason ELSE ?4 END,
        updated_at   = ?5,
        finished_at  = CASE WHEN ?6 THEN ?5 ELSE finished_at END
    WHERE id = ?1 AND (state = ?7 OR state = ?8 OR state = ?9) AND (?3 = '' OR provider_ref = '')
      AND (?10 = '' OR claim_token = ?10)
    RETURNING job_id, seq, provider, base_version, hedge, created_at,
        CASE WHEN ?3 = '' THEN provider_ref ELSE '' END, CASE WHEN ?4 = '' THEN reason ELSE '' END`

	// Complete's last step for the winner, once sqliteCompleteJob (cas.go)
	// changed its job.
	sqliteWinAttempt = `UPDATE job_attempts SET state = 'succeeded', updated_at = ?2, finished_at = ?2
    WHERE id = ?1 AND (state = 'starting' OR state = 'running' OR state = 'unknown')
    RETURNING ` + attemptCols

	// Complete's steps for a loser, once sqliteCompleteJob refused: its
	// job, read through the attempt, then the attempt's move to lost or
	// cancelled (?2) with its reason (?3), guarded as the swap was (open,
	// and claimed with ?5 if ?5 is not empty), returning the attempt.
	sqliteJobOfAttempt = `SELECT ` + jobCols + ` FROM jobs WHERE id = (SELECT job_id FROM job_attempts WHERE id = ?1)`
	sqliteLoseAttempt  = `UPDATE job_attempts SET state = ?2, reason = ?3, updated_at = ?4, finished_at = ?4
    WHERE id = ?1 AND (state = 'starting' OR state = 'running' OR state = 'unknown')
      AND (?5 = '' OR claim_token = ?5)
    RETURNING ` + attemptCols

	// Served by job_attempts_stale_idx (updated_at, claimed_until; partial
	// on open states): its predicate is repeated word for word, as SQLite
	// uses a partial index only for a query that says what it says.
	sqliteStaleAttempts = `SELECT ` + attemptCols + ` FROM job_attempts
    WHERE (state = 'starting' OR state = 'running' OR state = 'unknown')
      AND updated_at < ?3
      AND ((state = 'unknown' AND updated_at < ?1) OR (state <> 'unknown' AND updated_at < ?2))
      AND (claimed_until IS NULL OR claimed_until <= ?5)
    ORDER BY updated_at, id
    LIMIT ?4`

	sqliteClaimAttempt = `UPDATE job_attempts SET claim_token = ?4, claimed_until = ?6
    WHERE id = ?1 AND state = ?2 AND updated_at = ?3
      AND (claimed_until IS NULL OR claimed_until <= ?5)
    RETURNING ` + attemptCols

	sqliteRenewClaim = `UPDATE job_attempts SET claimed_until = ?3 WHERE id = ?1 AND claim_token = ?2`
	sqliteClaimToken = `SELECT claim_token FROM job_attempts WHERE id = ?1`

	sqliteRecordVerification = `INSERT INTO job_verifications (` + verificationCols + `)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

	sqliteVerifications = `SELECT ` + verificationCols + ` FROM job_verifications
    WHERE (?1 = '' OR provider = ?1) AND (?2 = '' OR kind = ?2) AND (?3 = '' OR contract_version = ?3)
    ORDER BY verified_at DESC, id DESC LIMIT ?4`

	// Purgeable jobs, read through jobs_created_at_idx (partial: closed
	// jobs only), oldest first, as in store_postgres.go.
	sqlitePurgeable = `closed_at IS NOT NULL AND created_at < ?1 AND closed_at < ?1
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                      WHERE a.job_id = jobs.id AND (a.state = 'starting' OR a.state = 'running' OR a.state = 'unknown'))`

	sqlitePurgeCandidates = `SELECT id FROM jobs WHERE ` + sqlitePurgeable + ` ORDER BY created_at LIMIT ?2`
	sqliteCountPurgeable  = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM jobs WHERE ` + sqlitePurgeable
)

// CreateJob implements Store. Reads are cheap and concurrent and writes
// are serialised, so it looks for a replay through the reader pool before
// it queues for the write lock, unless keys have been new of late
// (keyStreak): then it goes straight to the insert, which finds a replay
// by itself (it writes nothing for a key that is taken), and a new key
// costs one statement, not two, and no CPU that the writer could use. Of
// concurrent calls of this store with one owner and key that all found no
// job, only the first writes; the others wait for it and return the job it
// created or found (a copy each), and write themselves only if it failed.
// A storm of duplicates costs one write, not one per caller in line for
// the lock.
func (s *SQLiteStore) CreateJob(ctx context.Context, j Job) (Job, bool, error) {
	if !s.keys.newKeys() {
		if got, found, err := s.jobByKeyIfAny(ctx, j.Owner, j.Key); found || err != nil {
			if found {
				s.keys.record(false)
			}
			return got, false, err
		}
	}
	k := ownerKey{j.Owner, j.Key}
	s.creatingMu.Lock()
	if c := s.creating[k]; c != nil {
		c.waiters++
		s.creatingMu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return Job{}, false, s.interpret("create job", ctx.Err())
		}
		if c.err == nil {
			s.keys.record(false) // the key was taken: by the call waited for
			got := c.job
			got.Params, got.Result = slices.Clone(got.Params), slices.Clone(got.Result)
			return got, false, nil
		}
		// The first failed (its ctx ended, say): write in this call's turn.
		return s.writeJob(ctx, j)
	}
	c := &creation{done: make(chan struct{})}
	if s.creating == nil {
		s.creating = map[ownerKey]*creation{}
	}
	s.creating[k] = c
	s.creatingMu.Unlock()
	got, created, err := s.writeJob(ctx, j)
	c.job, c.err = got, err
	s.creatingMu.Lock()
	delete(s.creating, k)
	shared := c.waiters > 0
	s.creatingMu.Unlock()
	close(c.done)
	if shared {
		// The waiters copy c.job; this call's caller gets a copy of its own.
		got.Params, got.Result = slices.Clone(got.Params), slices.Clone(got.Result)
	}
	return got, created, err
}

// jobByKeyIfAny is JobByKey for CreateJob, through the reader pool: a
// miss, the common case of a new key, scans nothing.
func (s *SQLiteStore) jobByKeyIfAny(ctx context.Context, owner, key string) (Job, bool, error) {
	rows, err := s.rdb.QueryContext(ctx, sqliteJobByKey, owner, key)
	if err != nil {
		return Job{}, false, s.interpret("get job by key", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return Job{}, false, s.interpret("get job by key", rows.Err())
	}
	j, err := scanJob(rows)
	if err != nil {
		return Job{}, false, s.interpret("get job by key", err)
	}
	return j, true, nil
}

// writeJob is CreateJob's write, in its turn.
func (s *SQLiteStore) writeJob(ctx context.Context, j Job) (Job, bool, error) {
	var got Job
	var created bool
	err := s.writeOne(ctx, "create job", func() (err error) {
		got, created, err = s.createJob(ctx, s.db, j)
		return err
	})
	if err == nil {
		s.keys.record(created)
	}
	return got, created, err
}

// CreateJobTx implements Store. It runs each statement once, without the
// write queue (the caller's transaction holds SQLite's lock already, or
// takes it by itself, and the next writer in the queue may be waiting for
// the very connection it holds). A deferred transaction that has read and
// must now write gets SQLITE_BUSY at once while another connection writes,
// and SQLITE_BUSY_SNAPSHOT once that connection has committed; one that has
// not read gets SQLITE_BUSY after the busy timeout. SQLite asks for the
// transaction to be rolled back in every case: these are returned as a
// StorageError of kind StorageConflict.
func (s *SQLiteStore) CreateJobTx(ctx context.Context, tx DBTX, j Job) (Job, bool, error) {
	got, created, err := s.createJob(ctx, tx, j)
	return got, created, inCallerTx(err)
}

// createJob inserts j, or reads the job bound to its key. The job it
// inserted is j as stored: times in whole microseconds, in UTC.
func (s *SQLiteStore) createJob(ctx context.Context, q DBTX, j Job) (Job, bool, error) {
	created := time.UnixMicro(j.CreatedAt.UnixMicro()).UTC()
	for range maxRetries {
		n, err := rowsAffected(ctx, q, sqliteCreateJob,
			j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, created.UnixMicro())
		if err != nil {
			return Job{}, false, s.interpret("create job", err)
		}
		if n == 1 {
			return Job{ID: j.ID, Owner: j.Owner, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: slices.Clone(j.Params),
				Fingerprint: j.Fingerprint, State: JobPending, Version: 1, CreatedAt: created, UpdatedAt: created}, true, nil
		}
		got, err := queryOne(ctx, q, s, "get job by key", errNoJobForKey, scanJob, sqliteJobByKey, j.Owner, j.Key)
		if !errors.Is(err, ErrNotFound) {
			return got, false, err
		}
		// Purged in between by a writer outside the queue: insert again.
	}
	return Job{}, false, errKeptChanging("create job")
}

// Job implements Store.
func (s *SQLiteStore) Job(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, s.rdb, s, "get job", jobNotFound(id), scanJob, sqliteJobByID, id)
}

// JobByKey implements Store.
func (s *SQLiteStore) JobByKey(ctx context.Context, owner, key string) (Job, error) {
	return queryOne(ctx, s.rdb, s, "get job by key", errNoJobForKey, scanJob, sqliteJobByKey, owner, key)
}

// ListJobs implements JobLister.
func (s *SQLiteStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query := sqliteListJobs
	if q.Newest {
		query = sqliteListJobsNewest
	}
	var states strings.Builder // " pending running ": one string the statement searches
	for _, st := range q.States {
		states.WriteString(" " + string(st))
	}
	if states.Len() > 0 {
		states.WriteString(" ")
	}
	micros := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.UnixMicro()
	}
	return queryAll(ctx, s.rdb, s, "list jobs", scanJob, query,
		q.Owner, states.String(), q.Kind, q.Provider, micros(q.CreatedAfter), micros(q.CreatedBefore), q.After, listLimit(q))
}

// sqliteListJobs and sqliteListJobsNewest are ListJobs, oldest or newest
// first, as pgListJobs: each predicate holds when its parameter is empty.
// The states come as one string of space-separated names (?2).
const (
	sqliteListJobsWhere = ` FROM jobs
    WHERE (?1 = '' OR owner = ?1)
      AND (?2 = '' OR instr(?2, ' ' || state || ' ') > 0)
      AND (?3 = '' OR kind = ?3)
      AND (?4 = '' OR provider = ?4)
      AND (?5 IS NULL OR created_at >= ?5)
      AND (?6 IS NULL OR created_at < ?6)`
	sqliteListJobs       = `SELECT ` + jobCols + sqliteListJobsWhere + ` AND (?7 = '' OR id > ?7) ORDER BY id LIMIT ?8`
	sqliteListJobsNewest = `SELECT ` + jobCols + sqliteListJobsWhere + ` AND (?7 = '' OR id < ?7) ORDER BY id DESC LIMIT ?8`
)

// CloseJob implements Store.
func (s *SQLiteStore) CloseJob(ctx context.Context, c JobClose) (Job, error) {
	if err := c.Check(); err != nil {
		return Job{}, err
	}
	for range maxRetries {
		var j Job
		err := s.writeOne(ctx, "close job", func() (err error) {
			return s.returning(ctx, func(sc scanner) (err error) {
				j, err = scanJob(sc)
				return err
			}, sqliteCloseJob, c.ID, string(c.To), c.Reason, c.At.UnixMicro(), c.To == JobFailed)
		})
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
func (s *SQLiteStore) Attempt(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, s.rdb, s, "get attempt", attemptNotFound(id), scanAttempt, sqliteAttemptByID, id)
}

// Attempts implements Store.
func (s *SQLiteStore) Attempts(ctx context.Context, jobID string) ([]Attempt, error) {
	out, err := queryAll(ctx, s.rdb, s, "list attempts", scanAttempt, sqliteAttempts, jobID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	// No attempt: is there a job?
	_, err = queryOne(ctx, s.rdb, s, "list attempts", jobNotFound(jobID), scanValue[int], sqliteJobExists, jobID)
	return out, err
}

// CreateAttempt implements Store: the guard and count on the job row, then
// the attempt's insert, in one immediate transaction.
func (s *SQLiteStore) CreateAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	for range maxRetries {
		a, err := s.createAttempt(ctx, na)
		if !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, errUniqueInDoubt) {
			return a, err
		}
		if err := whyNoAttempt(ctx, s, na); err != nil {
			return Attempt{}, err
		}
	}
	return Attempt{}, errKeptChanging("start attempt")
}

// createAttempt runs the guard and count, then the insert, and builds the
// attempt from what it wrote: the insert either writes the row it is given
// or fails.
func (s *SQLiteStore) createAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	var a Attempt
	at := time.UnixMicro(na.At.UnixMicro()).UTC()
	err := s.inTx(ctx, "start attempt", func(ctx context.Context, st sqliteConnStatements) error {
		// The arguments both statements take are boxed once, and the guard's
		// answer is scanned into one value rather than three.
		jobID, micros := any(na.JobID), any(at.UnixMicro())
		var job struct {
			version  int64
			seq      int
			provider string
		}
		err := st.queryRow(ctx, sqliteOpenJob, jobID, na.Provider, micros, na.Hedge).Scan(&job.version, &job.seq, &job.provider)
		if err != nil {
			return s.interpret("start attempt", err)
		}
		if _, err := st.exec(ctx, sqliteInsertAttempt, na.ID, jobID, job.seq, job.provider, job.version, na.Hedge, micros); err != nil {
			return s.interpret("start attempt", err)
		}
		a = Attempt{ID: na.ID, JobID: na.JobID, Seq: job.seq, Provider: job.provider, State: AttemptStarting,
			BaseVersion: job.version, Hedge: na.Hedge, CreatedAt: at, UpdatedAt: at}
		return nil
	})
	return a, err
}

// UpdateAttempt implements Store: one guarded update, which returns what
// the call does not know of the attempt.
//
// On a store whose writer waits for SQLite's lock only briefly (shortBusy),
// the update runs without ctx's cancellation once ctx is found live: it
// changes one row and waits for no one but a writer outside the write
// queue, for the busy timeout at most, after which write looks at ctx
// again. A statement run with a context that can be cancelled costs the
// driver a goroutine or a callback registered on the context, and
// database/sql another goroutine to watch its rows.
func (s *SQLiteStore) UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error) {
	if err := u.Check(); err != nil {
		return Attempt{}, err
	}
	from1, from2, from3 := fromStates(u.From)
	at := time.UnixMicro(u.At.UnixMicro()).UTC()
	args := []any{u.ID, stateArg(string(u.To)), u.ProviderRef, u.Reason, at.UnixMicro(), u.To.Terminal(),
		stateArg(from1), stateArg(from2), stateArg(from3), u.ClaimToken}
	for range maxRetries {
		var a Attempt
		err := s.writeOne(ctx, "update attempt", func() error {
			qctx := ctx
			if s.shortBusy && ctx.Done() != nil {
				if err := ctx.Err(); err != nil {
					return err
				}
				qctx = context.WithoutCancel(ctx)
			}
			err := s.returning(qctx, func(sc scanner) error {
				return sc.Scan(&a.JobID, &a.Seq, &a.Provider, &a.BaseVersion, &a.Hedge, dbTime{&a.CreatedAt}, &a.ProviderRef, &a.Reason)
			}, sqliteUpdateAttempt, args...)
			if err != nil {
				return err
			}
			a.ID, a.State, a.UpdatedAt = u.ID, u.To, at
			if u.To.Terminal() {
				a.FinishedAt = at
			}
			if u.ProviderRef != "" {
				a.ProviderRef = u.ProviderRef
			}
			if u.Reason != "" {
				a.Reason = u.Reason
			}
			return nil
		})
		err = s.interpret("update attempt", err)
		inDoubt := errors.Is(err, errUniqueInDoubt)
		if !inDoubt && !errors.Is(err, sql.ErrNoRows) {
			return a, err
		}
		if cur, err := whyNotUpdated(ctx, s, u, inDoubt); err != nil {
			return cur, err
		}
	}
	return Attempt{}, errKeptChanging("update attempt")
}

// CompleteAttempt implements Store: the compare-and-swap of cas.go, in one
// immediate transaction of two statements for the winner, the swap and
// the attempt's move, and of three for a loser: the refused swap, the job
// (which says whether the attempt lost or its job was closed without it)
// and the attempt's move. Each returns its row. Under the write lock
// nothing changes between statements, so the job a loser reads is the one
// its swap found.
func (s *SQLiteStore) CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error) {
	var j Job
	var a Attempt
	at := time.UnixMicro(c.At.UnixMicro()).UTC()
	err := s.inTx(ctx, "complete attempt", func(ctx context.Context, st sqliteConnStatements) error {
		// The arguments that several statements take are boxed once.
		attemptID, micros := any(c.AttemptID), any(at.UnixMicro())
		var err error
		j, err = scanJob(st.writeRow(ctx, sqliteCompleteJob, attemptID, string(c.Result), micros, c.ClaimToken))
		switch {
		case err == nil:
			a, err = scanAttempt(st.writeRow(ctx, sqliteWinAttempt, attemptID, micros))
			if errors.Is(err, sql.ErrNoRows) {
				return errKeptChanging("complete attempt") // cannot happen: the swap found it open, under the write lock
			} else if err != nil {
				return s.interpret("complete attempt", err)
			}
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return s.interpret("complete attempt", err)
		}
		// Refused. Under the write lock nothing has changed since: if the
		// attempt exists, its job says why (closed without a winner, or
		// won by another attempt), and the attempt's move, guarded as the
		// swap was, finds it open and claimed as asked, or no row.
		j, err = scanJob(st.queryRow(ctx, sqliteJobOfAttempt, attemptID))
		if errors.Is(err, sql.ErrNoRows) {
			return err // no such attempt: reported below
		} else if err != nil {
			return s.interpret("get job", err)
		}
		state := AttemptCancelled // the job was closed without a winner
		if j.CompletedBy != "" {
			state = AttemptLost // another attempt completed the job first
		}
		a, err = scanAttempt(st.writeRow(ctx, sqliteLoseAttempt, attemptID, string(state), DroppedReason(j), micros, c.ClaimToken))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return s.interpret("complete attempt", err)
		}
		return err // nil, or not open or claimed by another: reported below, as stored
	})
	if errors.Is(err, sql.ErrNoRows) {
		return whyNotCompleted(ctx, s, c)
	}
	if err != nil {
		return Job{}, Attempt{}, err
	}
	return completed(j, a)
}

// StaleAttempts implements Store.
func (s *SQLiteStore) StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error) {
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
	return queryAll(ctx, s.rdb, s, "list stale attempts", scanAttempt, sqliteStaleAttempts,
		q.UnknownBefore.UnixMicro(), q.OpenBefore.UnixMicro(), upper.UnixMicro(), limit, unclaimed.UnixMicro())
}

// ClaimAttempt implements Store. The write lock lets one of racing claims
// change the row; the others find it claimed.
func (s *SQLiteStore) ClaimAttempt(ctx context.Context, c AttemptClaim) (Attempt, bool, error) {
	if err := c.Check(); err != nil {
		return Attempt{}, false, err
	}
	if !c.State.Open() { // only an attempt in doubt is reconciled
		return Attempt{}, false, nil
	}
	var a Attempt
	err := s.writeOne(ctx, "claim attempt", func() (err error) {
		return s.returning(ctx, func(sc scanner) (err error) {
			a, err = scanAttempt(sc)
			return err
		}, sqliteClaimAttempt, c.ID, string(c.State), c.UpdatedAt.UnixMicro(), c.Token, c.At.UnixMicro(), c.Until.UnixMicro())
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, false, nil
	}
	if err != nil {
		return Attempt{}, false, s.interpret("claim attempt", err)
	}
	return a, true, nil
}

// RenewClaim implements Store.
func (s *SQLiteStore) RenewClaim(ctx context.Context, c AttemptClaim) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	var n int64
	err := s.writeOne(ctx, "renew claim", func() (err error) {
		n, err = rowsAffected(ctx, s.db, sqliteRenewClaim, c.ID, c.Token, c.Until.UnixMicro())
		return err
	})
	if err != nil {
		return false, s.interpret("renew claim", err)
	}
	return n == 1, nil
}

// RecordVerification implements Store.
func (s *SQLiteStore) RecordVerification(ctx context.Context, v Verification) error {
	var expires any
	if !v.ExpiresAt.IsZero() {
		expires = v.ExpiresAt.UnixMicro()
	}
	err := s.writeOne(ctx, "record verification", func() error {
		_, err := s.db.ExecContext(ctx, sqliteRecordVerification,
			v.ID, v.Provider, v.Kind, v.ContractVersion, v.Passed, v.Reason, v.VerifiedAt.UnixMicro(), expires)
		return err
	})
	return s.interpret("record verification", err)
}

// Verifications implements Store.
func (s *SQLiteStore) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.rdb, s, "list verifications", scanVerification, sqliteVerifications, f.Provider, f.Kind, f.ContractVersion, limit)
}

// PurgeJobs implements Store: one short immediate transaction per batch,
// serialised with the other writers; it is short because the batch is
// bounded. The attempts are deleted explicitly, not left to ON DELETE
// CASCADE, since foreign keys may be off on a connection the caller
// passed in.
func (s *SQLiteStore) PurgeJobs(ctx context.Context, q PurgeQuery) (PurgeCount, error) {
	var n PurgeCount
	before := q.Before.UnixMicro()
	if q.DryRun {
		if err := s.rdb.QueryRowContext(ctx, sqliteCountPurgeable, before).Scan(&n.Jobs, &n.Attempts); err != nil {
			return PurgeCount{}, s.interpret("count purgeable", err)
		}
		return n, nil
	}
	if q.Limit <= 0 {
		return n, nil
	}
	err := s.inConnTx(ctx, "purge", func(ctx context.Context, conn *sql.Conn) error {
		n = PurgeCount{}
		candidates, err := queryAll(ctx, conn, s, "purge", scanValue[string], sqlitePurgeCandidates, before, q.Limit)
		if err != nil || len(candidates) == 0 {
			return err
		}
		ids := make([]any, len(candidates))
		for i, id := range candidates {
			ids[i] = id
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
		if n.Attempts, err = rowsAffected(ctx, conn, `DELETE FROM job_attempts WHERE job_id IN `+in, ids...); err != nil {
			return s.interpret("purge", err)
		}
		if n.Jobs, err = rowsAffected(ctx, conn, `DELETE FROM jobs WHERE id IN `+in, ids...); err != nil {
			return s.interpret("purge", err)
		}
		return nil
	})
	if err != nil {
		return PurgeCount{}, err
	}
	return n, nil
}

// The reads that explain a refused write (see rowReader), through the
// writer's connection.

func (s *SQLiteStore) jobForWrite(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, s.db, s, "get job", jobNotFound(id), scanJob, sqliteJobByID, id)
}

func (s *SQLiteStore) attemptForWrite(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, s.db, s, "get attempt", attemptNotFound(id), scanAttempt, sqliteAttemptByID, id)
}

func (s *SQLiteStore) blocker(ctx context.Context, jobID string) (*AttemptInFlightError, error) {
	return queryOne(ctx, s.db, s, "find blocking attempt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, jobID)
	}, sqliteBlocker, jobID)
}

func (s *SQLiteStore) otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error) {
	return queryOne(ctx, s.db, s, "find attempt in doubt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, a.JobID)
	}, sqliteOtherInDoubt, a.JobID, a.ID)
}

func (s *SQLiteStore) claimToken(ctx context.Context, attemptID string) (string, error) {
	return connReader{s, s.db}.claimToken(ctx, attemptID)
}

// connReader reads a claim inside a transaction of the store's.
type connReader struct {
	*SQLiteStore
	q DBTX
}

func (r connReader) claimToken(ctx context.Context, attemptID string) (string, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "check claim", attemptNotFound(attemptID), scanValue[string], sqliteClaimToken, attemptID)
}

// Writing: every write waits its turn in the write queue, then runs, and
// runs again while SQLite says it is busy (a writer outside the queue has
// the lock), until ctx ends.

// returning runs a write that returns one row (UPDATE … RETURNING) on the
// writer connection, outside a transaction, and gives the row to scan. It
// reads the statement to its end: SQLite runs its automatic checkpoint
// after a write when the write's statement finishes, not when a statement
// read for one row is reset, as database/sql's QueryRow resets it, and
// writes read that way never checkpoint the write-ahead log, which grows
// by every page they write until another write does
// (TestSQLiteWritesKeepTheLogBounded). Like inTx, it runs on go-sqlite3's
// connection itself where it can.
func (s *SQLiteStore) returning(ctx context.Context, scan func(scanner) error, query string, args ...any) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return sqliteStatements(conn, func(st sqliteConnStatements) error {
		return scan(st.writeRow(ctx, query, args...))
	})
}

// writeOne runs fn, one statement through the writer connection, in its
// turn.
func (s *SQLiteStore) writeOne(ctx context.Context, op string, fn func() error) error {
	return s.write(ctx, op, func(locked func()) error {
		err := fn()
		if !sqliteBusy(err) {
			locked()
		}
		return err
	})
}

// inTx runs fn inside an immediate transaction on the writer connection, in
// its turn: the write lock is taken at BEGIN, where a busy wait can be
// retried. Once BEGIN holds the lock, nothing the transaction does waits
// for anyone (in WAL, COMMIT takes no further lock), so fn's statements and
// the COMMIT or ROLLBACK run to their end even if ctx is cancelled
// meanwhile: fn gets ctx without its cancellation. A statement run with a
// context that can be cancelled costs the driver a goroutine (an Exec) or
// a callback registered on the context (a query), to interrupt it. The
// statements, BEGIN and COMMIT included, run on the driver's connection
// itself where it is go-sqlite3's (sqliteStatements); fn must not use the
// store's handles meanwhile, as the connection is held.
//
// On a store with a write queue (OpenSQLite's), the transactions of inTx
// that wait for their turn together are committed together (txLine): fn
// may run in another caller's goroutine, and must only write to what its
// caller reads after inTx returns.
func (s *SQLiteStore) inTx(ctx context.Context, op string, fn func(ctx context.Context, st sqliteConnStatements) error) error {
	if s.queue == nil {
		return s.withWriter(ctx, op, func(conn *sql.Conn, locked func()) error {
			return sqliteStatements(conn, func(st sqliteConnStatements) error {
				return s.transact(ctx, op, st, locked, func(held context.Context) error { return fn(held, st) })
			})
		})
	}
	t := &lineTx{ctx: ctx, op: op, fn: fn, locked: s.waitObserver(), done: make(chan struct{})}
	s.line.join(t)
	if err := s.queue.lock(ctx, t.done); err != nil {
		if err != errTaken && s.line.leave(t) {
			return s.interpret(op, err)
		}
		<-t.done
		return t.err
	}
	defer s.queue.unlock()
	if s.line.isTaken(t) { // by the batch that held the turn before
		<-t.done
		return t.err
	}
	err := retryBusy(ctx, func() error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.interpret(op, err)
		}
		defer conn.Close()
		return sqliteStatements(conn, func(st sqliteConnStatements) error {
			if _, err := st.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
				return s.interpret(op, err)
			}
			limit := maxLineBatch
			if _, known := st.autocommit(); !known {
				limit = 1 // it could not tell a batch SQLite rolled back whole
			}
			s.commitBatch(st, s.line.take(t, limit))
			return nil
		})
	})
	if err != nil && s.line.leave(t) { // never began: the next writer in line leads
		return err
	}
	<-t.done
	return t.err
}

// maxLineBatch is the most transactions txLine commits together.
const maxLineBatch = 64

// txLine is the line of inTx's transactions waiting for their turn to
// write. The one whose turn comes (the leader) begins a transaction, takes
// every transaction in line, its own among them, runs each in a savepoint
// of its own, and commits once (commitBatch).
//
// Under SQLite's write lock most of a small transaction's time is its
// commit: every page it changed is appended to the write-ahead log whole
// (a Complete changes four: the rows of the job and the attempt, and a
// page of each of two partial indexes), the log's index in shared memory
// is updated and, at synchronous=FULL, the log is synced. Transactions
// committed together write a page they share once, and sync once.
//
// Each keeps its own outcome. One whose fn fails is rolled back to its
// savepoint and the others go on; each sees the writes of those before it,
// exactly as if they had run one after another. What differs is only that
// they become durable together: none returns before the commit, and if
// the commit fails, none of them wrote anything and each gets its error.
// A caller whose ctx ends while it waits in line leaves it, having written
// nothing; once taken, its transaction runs to its end, as once BEGIN
// holds the lock. If SQLite rolls the whole transaction back on its own
// (an I/O error, a full disk, no memory), every transaction of the batch
// gets an error of that kind and none wrote anything.
type txLine struct {
	mu      sync.Mutex
	waiting []*lineTx
	batch   []*lineTx // the last batch taken, whose array take reuses
}

// lineTx is one inTx call in txLine.
type lineTx struct {
	ctx    context.Context
	op     string
	fn     func(ctx context.Context, st sqliteConnStatements) error
	locked func()        // see waitObserver
	done   chan struct{} // closed when err is its outcome, before the leader's turn ends
	err    error
	isIn   bool // in line (under txLine.mu)
}

func (l *txLine) join(t *lineTx) {
	l.mu.Lock()
	t.isIn = true
	l.waiting = append(l.waiting, t)
	l.mu.Unlock()
}

// leave takes t out of line and reports whether it was still there: false
// means a leader took it, and its outcome will come on t.done.
func (l *txLine) leave(t *lineTx) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !t.isIn {
		return false
	}
	t.isIn = false
	l.waiting = slices.DeleteFunc(l.waiting, func(w *lineTx) bool { return w == t })
	return true
}

// isTaken reports whether a leader took t.
func (l *txLine) isTaken(t *lineTx) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !t.isIn
}

// take takes leader and up to limit-1 others out of line, first come
// first. The batch it returns is reused by the next leader's take.
func (l *txLine) take(leader *lineTx, limit int) []*lineTx {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.batch)
	batch := append(l.batch[:0], leader)
	l.waiting = slices.DeleteFunc(l.waiting, func(w *lineTx) bool {
		if w == leader {
			return true
		}
		if len(batch) == limit {
			return false
		}
		batch = append(batch, w)
		return true
	})
	for _, t := range batch {
		t.isIn = false
	}
	l.batch = batch
	return batch
}

// commitBatch runs the batch's transactions in the transaction st has
// begun, each in a savepoint when there are several, commits, sets every
// transaction's err and closes its done.
func (s *SQLiteStore) commitBatch(st sqliteConnStatements, batch []*lineTx) {
	defer func() {
		for _, t := range batch {
			close(t.done)
		}
	}()
	if s.onBatch != nil {
		s.onBatch(len(batch))
	}
	bg := context.Background() // the statements of a transaction begun run to their end
	several := len(batch) > 1
	for i, t := range batch {
		if err := t.ctx.Err(); err != nil && i > 0 {
			t.err = s.interpret(t.op, err) // ended while in line: nothing written
			continue
		}
		t.locked()
		held := t.ctx
		if held.Done() != nil {
			held = context.WithoutCancel(held)
		}
		if several {
			if _, err := st.exec(bg, "SAVEPOINT jobs_tx"); err != nil {
				s.abandonBatch(st, batch, s.interpret(t.op, err))
				return
			}
		}
		err := t.fn(held, st)
		if err == nil && several {
			_, err = st.exec(bg, "RELEASE jobs_tx")
			if err != nil {
				err = s.interpret(t.op, err)
			}
		}
		if err == nil {
			continue
		}
		t.err = err
		if !several {
			st.exec(bg, "ROLLBACK")
			return
		}
		if on, _ := st.autocommit(); on {
			// SQLite rolled the whole transaction back.
			s.abandonBatch(st, batch, err)
			return
		}
		if _, err := st.exec(bg, "ROLLBACK TO jobs_tx"); err != nil {
			s.abandonBatch(st, batch, s.interpret(t.op, err))
			return
		}
		if _, err := st.exec(bg, "RELEASE jobs_tx"); err != nil {
			s.abandonBatch(st, batch, s.interpret(t.op, err))
			return
		}
	}
	err := s.commit(st, batch)
	if err == nil {
		return
	}
	st.exec(bg, "ROLLBACK")
	for _, t := range batch {
		if t.err == nil {
			t.err = s.interpret(t.op, err)
		}
	}
}

// commit commits st's transaction. A COMMIT that finds SQLite busy (in a
// journal mode other than WAL, while a reader holds the database) leaves
// the transaction open, and is retried as long as a caller of the batch
// still waits for it.
func (s *SQLiteStore) commit(st sqliteConnStatements, batch []*lineTx) error {
	for {
		_, err := st.exec(context.Background(), "COMMIT")
		if !sqliteBusy(err) {
			return err
		}
		if on, known := st.autocommit(); on || !known {
			return err
		}
		live := func(t *lineTx) bool { return t.ctx.Err() == nil }
		if !slices.ContainsFunc(batch, live) || !pause(context.Background()) {
			return err
		}
	}
}

// abandonBatch ends a batch whose transaction cannot go on, because cause:
// it is rolled back, and every transaction of the batch without an error
// of its own gets one of cause's kind.
func (s *SQLiteStore) abandonBatch(st sqliteConnStatements, batch []*lineTx, cause error) {
	st.exec(context.Background(), "ROLLBACK")
	kind := StorageOther
	var se *StorageError
	if errors.As(cause, &se) {
		kind = se.Kind
	}
	for _, t := range batch {
		if t.err == nil {
			t.err = &StorageError{Op: t.op, Kind: kind, Message: "rolled back with the writes committed with it: " + cause.Error()}
		}
	}
}

// inConnTx is inTx for a transaction whose statements run through
// database/sql on conn: those that read many rows, or share their code
// with the statements of a caller's transaction (DBTX).
func (s *SQLiteStore) inConnTx(ctx context.Context, op string, fn func(ctx context.Context, conn *sql.Conn) error) error {
	return s.withWriter(ctx, op, func(conn *sql.Conn, locked func()) error {
		return s.transact(ctx, op, connStatements{conn}, locked, func(held context.Context) error { return fn(held, conn) })
	})
}

// withWriter runs fn with the writer connection, in the caller's turn.
func (s *SQLiteStore) withWriter(ctx context.Context, op string, fn func(conn *sql.Conn, locked func()) error) error {
	return s.write(ctx, op, func(locked func()) error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.interpret(op, err)
		}
		defer conn.Close()
		return fn(conn, locked)
	})
}

// transact runs body between BEGIN IMMEDIATE and COMMIT on st, or rolls
// back if body or the COMMIT fails. body gets ctx without its cancellation.
func (s *SQLiteStore) transact(ctx context.Context, op string, st sqliteConnStatements, locked func(), body func(held context.Context) error) error {
	if _, err := st.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.interpret(op, err)
	}
	locked()
	held := ctx
	if held.Done() != nil {
		held = context.WithoutCancel(ctx)
	}
	if err := body(held); err != nil {
		st.exec(held, "ROLLBACK")
		return err
	}
	if _, err := st.exec(held, "COMMIT"); err != nil {
		st.exec(held, "ROLLBACK")
		return s.interpret(op, err)
	}
	return nil
}

// write runs fn in the caller's turn in the write queue. fn calls locked as
// soon as it holds SQLite's write lock, so that the wait can be observed
// (ObserveWriteWait). The turn is kept across retries (retryBusy).
func (s *SQLiteStore) write(ctx context.Context, op string, fn func(locked func()) error) error {
	locked := s.waitObserver()
	if err := s.queue.lock(ctx, nil); err != nil {
		return s.interpret(op, err)
	}
	defer s.queue.unlock()
	return retryBusy(ctx, func() error { return fn(locked) })
}

// waitObserver returns the function a write calls once it holds SQLite's
// write lock, which reports the time since waitObserver was called to
// ObserveWriteWait's function, once.
func (s *SQLiteStore) waitObserver() func() {
	if s.onWriteWait == nil {
		return func() {}
	}
	start := time.Now()
	observed := false
	return func() {
		if !observed {
			observed = true
			s.onWriteWait(time.Since(start))
		}
	}
}

// retryBusy runs fn until it does not find SQLite busy, or ctx ends. A
// writer that finds SQLite busy keeps its turn in the queue. Retries pause
// 1 to 3 ms: a writer that waits is already in line, and a longer sleep
// would only miss the moment the lock comes free.
func retryBusy(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !sqliteBusy(err) || !pause(ctx) {
			return err
		}
	}
}

// pause sleeps 1 to 3 ms and reports whether ctx is still live after.
func pause(ctx context.Context) bool {
	t := time.NewTimer(time.Millisecond + rand.N(2*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return ctx.Err() == nil
	}
}

// writeQueue puts the writers of one SQLite database in line, so that a
// write waits its turn instead of polling for SQLite's lock. SQLite's own
// wait for a busy database is not a queue: its busy handler sleeps for
// growing pauses (up to 100 ms each), and a process that has just released
// the lock takes it again while the others sleep, so under contention some
// writers wait for seconds while others write again and again.
//
// The queue has two stages. The store's own goroutines wait for a turn
// first come, first served. The goroutine whose turn it is then takes an
// exclusive OS lock on a file next to the database (lockWait), which
// stores in other processes, and other stores in this one, take before
// they write as well. A waiter there is woken by the kernel when the lock
// is released, rather than after a sleep. Only then does the write begin,
// and SQLite's lock is normally free.
//
// Neither stage costs more than it must when nobody waits: the turn is
// taken without a select on ctx, and the OS lock with one flock(2) on a
// descriptor of the lock file the store keeps open (own). Only a writer
// that finds the OS lock taken opens the file anew to wait for it, so that
// a wait given up when ctx ends can finish on a file of its own.
//
// A nil *writeQueue queues nothing: stores over a caller's *sql.DB.
type writeQueue struct {
	turn     chan struct{} // one slot: holding it is this store's turn
	lockPath string        // the shared lock file; "" for none (":memory:")
	own      *lockFile     // the lock file, open while the store is
	ownHeld  bool          // own is locked
	held     io.Closer     // a lock file opened to wait, while it is locked; closing unlocks it
}

// newWriteQueue returns a queue whose writers take an exclusive lock on the
// file at lockPath, or only queue within the store when lockPath is "".
func newWriteQueue(lockPath string) *writeQueue {
	return &writeQueue{turn: make(chan struct{}, 1), lockPath: lockPath}
}

// create opens the lock file, creating it if needed, and keeps it open, so
// that a directory that refuses it is reported when the store is opened.
func (q *writeQueue) create() error {
	f, err := openLockFile(q.lockPath)
	if err != nil {
		return err
	}
	q.own = f
	return nil
}

// close closes the lock file create opened.
func (q *writeQueue) close() error {
	if q == nil || q.own == nil {
		return nil
	}
	return q.own.Close()
}

// errTaken is what lock returns when ran is closed first.
var errTaken = errors.New("jobs: taken into a batch")

// lock waits until it is the caller's turn to write, until ctx ends (then
// it returns ctx's error), or until ran is closed (then it returns
// errTaken: the caller's transaction ran in another writer's batch, see
// txLine); ran may be nil. Every successful lock must be followed by one
// unlock.
func (q *writeQueue) lock(ctx context.Context, ran <-chan struct{}) error {
	if q == nil {
		return nil
	}
	select {
	case q.turn <- struct{}{}:
	default:
		select {
		case q.turn <- struct{}{}:
		case <-ran:
			return errTaken
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-ran: // that too, while the turn came free
			<-q.turn
			return errTaken
		default:
		}
	}
	if q.lockPath == "" {
		return nil
	}
	if q.own != nil && q.own.tryLock() {
		q.ownHeld = true
		return nil
	}
	f, err := lockWait(ctx, q.lockPath)
	if err != nil {
		<-q.turn
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &StorageError{Op: "lock for writing", Kind: StorageUnavailable, Message: err.Error()}
	}
	q.held = f
	return nil
}

// unlock ends the caller's turn: the file lock first, then the store's turn.
func (q *writeQueue) unlock() {
	if q == nil {
		return
	}
	if q.ownHeld {
		q.own.unlock()
		q.ownHeld = false
	}
	if q.held != nil {
		q.held.Close()
		q.held = nil
	}
	<-q.turn
	// Hand the turn over now. The receive has made the next writer
	// runnable, but on this goroutine's processor, where it runs only once
	// this goroutine blocks: until then the next write would wait for
	// whatever the caller does after its write (a Submit returning, the
	// next request being checked and fingerprinted), and the writes of a
	// busy store would be spaced by that work. Yielding costs next to
	// nothing when nobody waits. (Submit of new keys on 16 goroutines at
	// synchronous=NORMAL: about 10,900 a second without it, 16,300 with
	// it.)
	runtime.Gosched()
}

// Errors.

// SQLite's primary result codes that the store tells apart.
const (
	sqliteError      = 1
	sqliteBusyCode   = 5
	sqliteLocked     = 6
	sqliteReadOnly   = 8
	sqliteIOErr      = 10
	sqliteFull       = 13
	sqliteCantOpen   = 14
	sqliteConstraint = 19
	sqliteNotADB     = 26

	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// sqliteCode finds the extended result code SQLite gave for err: from
// mattn/go-sqlite3's error (store_sqlite_cgo.go), or from any driver's
// error with a Code() int method, such as modernc.org/sqlite's.
func sqliteCode(err error) (int, bool) {
	if code, ok := mattnCode(err); ok {
		return code, true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code(), true
	}
	return 0, false
}

// sqliteBusy reports whether err is SQLite's "database is locked": the
// statement did not run and can be run again.
func sqliteBusy(err error) bool {
	if err == nil {
		return false
	}
	var se *StorageError
	if errors.As(err, &se) {
		return se.Kind == StorageBusy
	}
	code, ok := sqliteCode(err)
	if !ok {
		return strings.Contains(err.Error(), "database is locked")
	}
	return code&0xff == sqliteBusyCode || code&0xff == sqliteLocked
}

// interpret maps SQLite's errors to this package's errors, by result code,
// whichever driver reported them.
func (s *SQLiteStore) interpret(op string, err error) error {
	if err, ok := passThrough(op, err); ok {
		return err
	}
	msg := err.Error()
	code, ok := sqliteCode(err)
	if !ok {
		kind := StorageOther
		if strings.Contains(msg, "database is locked") {
			kind = StorageBusy
		}
		return &StorageError{Op: op, Kind: kind, Message: msg}
	}
	if code == sqliteConstraintUnique || code == sqliteConstraintPrimaryKey {
		switch {
		case strings.Contains(msg, "jobs.owner, jobs.idempotency_key"):
			return errUniqueKey
		case strings.Contains(msg, "job_attempts.job_id") && !strings.Contains(msg, "seq"):
			return errUniqueInDoubt
		}
	}
	kind := StorageOther
	switch code & 0xff {
	case sqliteBusyCode, sqliteLocked:
		kind = StorageBusy
	case sqliteFull:
		kind = StorageFull
	case sqliteReadOnly:
		kind = StorageReadOnly
	case sqliteCantOpen, sqliteIOErr, sqliteNotADB:
		kind = StorageUnavailable
	case sqliteError:
		if strings.Contains(msg, "no such table") {
			kind = StorageSchema
		}
	}
	// The extended code's number: SQLITE_BUSY_SNAPSHOT (517) reads apart
	// from SQLITE_BUSY (5).
	return &StorageError{Op: op, Kind: kind, Code: strconv.Itoa(code), Message: msg}
}

// Key reuse: ReplaceJob retires the old job's key and creates the new job
// in one step. The unique constraint on (owner, idempotency_key) still
// binds every key: a retired job holds RetiredKey(key, new job's ID) in that
// column, longer than any key a client can submit and unique per
// replacement, which scanJob reads back into Job.Key and Job.ReplacedBy.

const (
	// sqliteReplaceBlocker is SQLiteStore.ReplaceJob's first statement:
	// the attempt that keeps the old job's key, if the job still holds the
	// key in one of the states that would free it and an attempt of it may
	// still act.
	sqliteReplaceBlocker = `SELECT a.id, a.state FROM job_attempts a JOIN jobs j ON j.id = a.job_id
    WHERE j.id = ?1 AND j.owner = ?2 AND j.idempotency_key = ?3 AND j.state IN (?4, ?5, ?6)
      AND (a.state = 'starting' OR a.state = 'unknown' OR a.state = 'running')
    ORDER BY CASE a.state WHEN 'running' THEN 1 ELSE 0 END, a.seq LIMIT 1`

	// sqliteRetireKey is SQLiteStore.ReplaceJob's second statement, after
	// sqliteReplaceBlocker found no attempt of the old job open; the third is
	// sqliteCreateJob. The write lock, taken at BEGIN, makes them atomic
	// against every other writer. An attempt whose result was dropped
	// keeps the key with its job, as in pgReplaceJob.
	sqliteRetireKey = `UPDATE jobs SET idempotency_key = ?4
    WHERE id = ?1 AND owner = ?2 AND idempotency_key = ?3 AND state IN (?5, ?6, ?7)
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                       WHERE a.job_id = ?1 AND a.state = 'cancelled'
                         AND a.reason IN ('` + ReasonDroppedJobCancelled + `', '` + ReasonDroppedJobFailed + `'))`
)

// ReplaceJob implements Store.
func (s *SQLiteStore) ReplaceJob(ctx context.Context, r JobReplacement) (Job, bool, error) {
	if err := r.Check(); err != nil {
		return Job{}, false, err
	}
	j := r.New
	a, b, c := jobStates(r.From)
	var got Job
	var created bool
	err := s.inConnTx(ctx, "replace job", func(ctx context.Context, conn *sql.Conn) error {
		blocker, err := queryOne(ctx, conn, s, "replace job", nil, func(sc scanner) (*AttemptInFlightError, error) {
			return scanBlocker(sc, r.OldID)
		}, sqliteReplaceBlocker, r.OldID, j.Owner, j.Key, a, b, c)
		if err != nil {
			return err
		}
		if blocker != nil {
			return blocker // an attempt of the old job may still act: its key stays
		}
		n, err := rowsAffected(ctx, conn, sqliteRetireKey, r.OldID, j.Owner, j.Key, RetiredKey(j.Key, j.ID), a, b, c)
		if err != nil {
			return s.interpret("replace job", err)
		}
		got, created, err = s.createJob(ctx, conn, j)
		if err == nil && n == 1 && !created {
			// The key was retired, so nothing else can hold it.
			err = &StorageError{Op: "replace job", Kind: StorageOther, Message: "the retired key is held by another job"}
		}
		return err
	})
	if err != nil {
		return Job{}, false, err
	}
	return got, created, nil
}

// sqliteConnStatements runs the statements of a transaction on the writer
// connection (sqliteStatements).
type sqliteConnStatements interface {
	// exec runs a statement and returns the number of rows it changed.
	exec(ctx context.Context, query string, args ...any) (int64, error)
	// queryRow runs a query and returns its first row, whose Scan returns
	// sql.ErrNoRows if it has none.
	queryRow(ctx context.Context, query string, args ...any) scanner
	// writeRow is queryRow for a write that returns its row, run to its
	// end (see returning).
	writeRow(ctx context.Context, query string, args ...any) scanner
	// autocommit reports whether the connection is outside a transaction,
	// if it can tell (known).
	autocommit() (on, known bool)
}

// connStatements runs statements through database/sql.
type connStatements struct{ c *sql.Conn }

func (s connStatements) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(ctx, s.c, query, args...)
}

func (s connStatements) queryRow(ctx context.Context, query string, args ...any) scanner {
	return s.c.QueryRowContext(ctx, query, args...)
}

func (s connStatements) writeRow(ctx context.Context, query string, args ...any) scanner {
	rows, err := s.c.QueryContext(ctx, query, args...)
	if err != nil {
		return errRow{err}
	}
	return finishedRow{rows}
}

func (connStatements) autocommit() (on, known bool) { return false, false }

// finishedRow is the first row of rows, which its Scan reads to their end.
type finishedRow struct{ rows *sql.Rows }

func (r finishedRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	for r.rows.Next() { // to the statement's end, where SQLite checkpoints
	}
	return r.rows.Err()
}

// valuesRow is a row of a driver's values, scanned as database/sql would
// scan them into the types the store reads (a driver.Value is nil, int64,
// float64, bool, []byte, string or time.Time). A []byte destination gets a
// copy; the values are not kept.
type valuesRow []driver.Value

func (r valuesRow) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("jobs: %d columns scanned into %d destinations", len(r), len(dest))
	}
	for i, d := range dest {
		if err := assignValue(d, r[i]); err != nil {
			return fmt.Errorf("jobs: column %d: %w", i, err)
		}
	}
	return nil
}

func assignValue(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(v)
	case *string:
		if s, ok := v.(string); ok {
			*d = s
			return nil
		}
	case *JobState:
		if s, ok := v.(string); ok {
			*d = JobState(s)
			return nil
		}
	case *AttemptState:
		if s, ok := v.(string); ok {
			*d = AttemptState(s)
			return nil
		}
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
	case *int:
		if n, ok := v.(int64); ok {
			*d = int(n)
			return nil
		}
	case *bool:
		switch b := v.(type) {
		case bool:
			*d = b
			return nil
		case int64:
			*d = b != 0
			return nil
		}
	case *[]byte:
		switch b := v.(type) {
		case nil:
			*d = nil
			return nil
		case string:
			*d = []byte(b)
			return nil
		case []byte:
			*d = slices.Clone(b)
			return nil
		}
	}
	return fmt.Errorf("cannot scan %T into %T", v, dest)
}
