package jobs

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// The SQLite store, in files named after what they hold:
//   - store_sqlite.go (this file): the type, opening, its settings, and the
//     methods, in the order of the Store contract, then of the
//     capabilities;
//   - store_sqlite_sql.go: every statement, in the order of the methods;
//   - store_sqlite_write.go: the write path: the write queue, and the line
//     of transactions committed together;
//   - store_sqlite_flock.go, store_sqlite_noflock.go: the lock file through
//     which writers of other stores and processes queue;
//   - store_sqlite_statements.go, store_sqlite_cgo.go,
//     store_sqlite_nocgo.go: how statements run on the writer connection,
//     on go-sqlite3's connection itself where it can;
//   - store_sqlite_errors.go: SQLite's result codes to this package's
//     errors.
// What both SQL stores share is in store_sql.go, the migration runner in
// migrate.go.

// SQLiteStore is the Store on SQLite. SQLite has one write lock for the
// whole database, so every write is one immediate transaction (BEGIN
// IMMEDIATE takes the lock first) or one statement, and nothing else writes
// while it runs: what a write reads is what it changes. Reads go through a
// pool of their own and never wait for writes (WAL). Writers queue for the
// lock instead of polling SQLite for it (see writeQueue).
//
// The driver is mattn/go-sqlite3 (cgo) for OpenSQLite; NewSQLiteStore
// takes a database opened with any SQLite driver for database/sql, errors
// being read by SQLite's result codes.
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
//     the file, inside the write lock.
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
func OpenSQLite(ctx context.Context, dsn string, opts ...SQLiteOption) (*SQLiteStore, error) {
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
func NewSQLiteStore(ctx context.Context, db *sql.DB, opts ...SQLiteOption) (*SQLiteStore, error) {
	s := &SQLiteStore{sqlHandles: sqlHandles{db: db, rdb: db}}
	if err := s.open(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// NewSQLiteStoreSQLX is NewSQLiteStore for an *sqlx.DB.
func NewSQLiteStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...SQLiteOption) (*SQLiteStore, error) {
	return NewSQLiteStore(ctx, db.DB, opts...)
}

func (s *SQLiteStore) open(ctx context.Context, opts []SQLiteOption) error {
	cfg := readSQLiteOptions(opts)
	s.onWriteWait = cfg.onWriteWait
	return checkSchema(ctx, s, cfg.storeConfig, sqliteMigrationPlan.development, s.migrate)
}

// Dialect returns SQLite.
func (s *SQLiteStore) Dialect() Dialect { return SQLite }

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
		return migrate(ctx, s.db, s, sqliteMigrationPlan)
	})
}

// sqliteMigrationPlan is how the store applies its migrations.
var sqliteMigrationPlan = migrationPlan{
	dialect: SQLite,
	begin:   "BEGIN IMMEDIATE",
	development: developmentSchema{
		detect:     sqliteIsDevelopment,
		detectArgs: []any{"jobs_schema_migrations", "intentjobs_schema_migrations"},
		latest:     5,
		baseline:   true,
		upgrade:    sqliteUpgradeDevelopment,
	},
}

// DatabaseSchemaVersion implements SQLStore.
func (s *SQLiteStore) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.rdb, s, qSchemaVersion)
}

// AppliedMigrations implements SQLStore.
func (s *SQLiteStore) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	return appliedMigrations(ctx, s.rdb, s, qAppliedMigrations)
}

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

// writeJob is CreateJob's write, in its turn. While another writer holds
// the turn, it joins the line of transactions committed together (inTx),
// as StartAttempt and Complete do: the inserts of new keys that wait for
// the write lock together share one commit, and write the pages they share
// (the table's last page, the last page of the index of IDs, which grow in
// the order of the IDs) once. Alone, it is one statement, which commits
// by itself.
func (s *SQLiteStore) writeJob(ctx context.Context, j Job) (got Job, created bool, err error) {
	if s.queue.busy() {
		got, created, err = s.writeJobInLine(ctx, j)
	} else {
		got, created, err = s.writeJobAlone(ctx, j)
	}
	if err == nil {
		s.keys.record(created)
	}
	return got, created, err
}

// writeJobAlone is writeJob's plain insert. (A function of its own, so that
// the line's closure, which escapes, does not move this one's variables to
// the heap.)
func (s *SQLiteStore) writeJobAlone(ctx context.Context, j Job) (Job, bool, error) {
	var got Job
	var created bool
	err := s.writeOne(ctx, "create job", func() (err error) {
		got, created, err = s.createJob(ctx, s.db, j)
		return err
	})
	return got, created, err
}

// writeJobInLine is writeJob's insert in the line of transactions.
func (s *SQLiteStore) writeJobInLine(ctx context.Context, j Job) (Job, bool, error) {
	var got Job
	var created bool
	err := s.inTx(ctx, "create job", func(ctx context.Context, st sqliteConnStatements) (err error) {
		got, created, err = s.createJobIn(ctx, st, j)
		return err
	})
	return got, created, err
}

// createJobIn is createJob in a transaction of inTx, which holds the write
// lock: a key that the insert finds taken is bound to a job that the read
// after it finds.
func (s *SQLiteStore) createJobIn(ctx context.Context, st sqliteConnStatements, j Job) (Job, bool, error) {
	created := time.UnixMicro(j.CreatedAt.UnixMicro()).UTC()
	n, err := st.exec(ctx, sqliteCreateJob,
		j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, created.UnixMicro())
	if err != nil {
		return Job{}, false, s.interpret("create job", err)
	}
	if n == 1 {
		return Job{ID: j.ID, Owner: j.Owner, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: slices.Clone(j.Params),
			Fingerprint: j.Fingerprint, State: JobPending, Version: 1, CreatedAt: created, UpdatedAt: created}, true, nil
	}
	got, err := scanJob(st.queryRow(ctx, sqliteJobByKey, j.Owner, j.Key))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, false, errKeptChanging("create job") // cannot happen: the insert found it, under the write lock
	} else if err != nil {
		return Job{}, false, s.interpret("get job by key", err)
	}
	return got, false, nil
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

// ReplaceJob implements Store: in one immediate transaction, the attempt
// that would block it (sqliteReplaceBlocker), the old key's retirement
// (sqliteRetireKey), and the new job's insert.
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

// Job implements Store.
func (s *SQLiteStore) Job(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, s.rdb, s, "get job", jobNotFound(id), scanJob, sqliteJobByID, id)
}

// JobByKey implements Store.
func (s *SQLiteStore) JobByKey(ctx context.Context, owner, key string) (Job, error) {
	return queryOne(ctx, s.rdb, s, "get job by key", errNoJobForKey, scanJob, sqliteJobByKey, owner, key)
}

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
		if err := s.explain(ctx, func(r rowReader) error { return whyNotClosed(ctx, r, c) }); err != nil {
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
		if err := s.explain(ctx, func(r rowReader) error { return whyNoAttempt(ctx, r, na) }); err != nil {
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
		var cur Attempt
		if err := s.explain(ctx, func(r rowReader) (err error) {
			cur, err = whyNotUpdated(ctx, r, u, inDoubt)
			return err
		}); err != nil {
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
		err := s.explain(ctx, func(r rowReader) (err error) {
			j, a, err = whyNotCompleted(ctx, r, c)
			return err
		})
		return j, a, err
	}
	if err != nil {
		return Job{}, Attempt{}, err
	}
	return completed(j, a)
}

// The capabilities, in the order of store.go.

// CreateJobTx implements TxStore. It runs each statement once, without the
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

// StaleAttempts implements ClaimStore.
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

// ClaimAttempt implements ClaimStore. The write lock lets one of racing claims
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

// RenewClaim implements ClaimStore.
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

// RecordVerification implements VerificationStore.
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

// Verifications implements VerificationStore.
func (s *SQLiteStore) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.rdb, s, "list verifications", scanVerification, sqliteVerifications, f.Provider, f.Kind, f.ContractVersion, limit)
}

// PurgeJobs implements PurgeStore: one short immediate transaction per batch,
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
		if n.Attempts, err = rowsAffected(ctx, conn, sqlitePurgeAttempts+in, ids...); err != nil {
			return s.interpret("purge", err)
		}
		if n.Jobs, err = rowsAffected(ctx, conn, sqlitePurgeJobs+in, ids...); err != nil {
			return s.interpret("purge", err)
		}
		return nil
	})
	if err != nil {
		return PurgeCount{}, err
	}
	return n, nil
}

// The reads that explain a refused write (see rowReader).

// explain runs why on the rows as one snapshot holds them: a read
// transaction on a connection of the reading pool, begun after the refused
// statement ended (so that it sees at least what that statement saw).
// BEGIN is sent as a statement of its own: the store's connections begin
// database/sql's transactions with the write lock (_txlock=immediate),
// which a read must not take.
func (s *SQLiteStore) explain(ctx context.Context, why func(rowReader) error) error {
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return s.interpret("read", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return s.interpret("read", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	return why(connReader{s, conn})
}

// connReader reads the rows of a refused write through q: a transaction of
// explain's, or of the store's own (a claim, inside its write).
type connReader struct {
	*SQLiteStore
	q DBTX
}

func (r connReader) jobForWrite(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "get job", jobNotFound(id), scanJob, sqliteJobByID, id)
}

func (r connReader) attemptForWrite(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "get attempt", attemptNotFound(id), scanAttempt, sqliteAttemptByID, id)
}

func (r connReader) blocker(ctx context.Context, jobID string) (*AttemptInFlightError, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "find blocking attempt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, jobID)
	}, sqliteBlocker, jobID)
}

func (r connReader) otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "find attempt in doubt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, a.JobID)
	}, sqliteOtherInDoubt, a.JobID, a.ID)
}

func (r connReader) claimToken(ctx context.Context, attemptID string) (string, error) {
	return queryOne(ctx, r.q, r.SQLiteStore, "check claim", attemptNotFound(attemptID), scanValue[string], sqliteClaimToken, attemptID)
}
