package mysql

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
)

// Store is the jobs.Store on MySQL or MariaDB. It implements every
// capability of package jobs: see the package documentation.
type Store struct {
	db     *sql.DB
	owned  bool // opened by Open: Close closes it
	srv    *server
	cfg    config
	notify *poller
	keys   keyStreak // CreateJob's recent keys

	closeOnce sync.Once
}

var (
	_ jobs.Store             = (*Store)(nil)
	_ jobs.TxStore           = (*Store)(nil)
	_ jobs.JobLister         = (*Store)(nil)
	_ jobs.ClaimStore        = (*Store)(nil)
	_ jobs.VerificationStore = (*Store)(nil)
	_ jobs.PurgeStore        = (*Store)(nil)
	_ jobs.CloseNotifier     = (*Store)(nil)
)

// Option configures how a Store is opened.
type Option func(*config)

type config struct {
	skipMigrations bool
	maxRetries     int
	pollInterval   time.Duration
	onRetry        func(op string, err error)
}

// SkipMigrations leaves the schema to the caller's own migration tool (see
// Migrations): opening only checks that the database is at the version
// this package expects, and fails with a *jobs.StorageError of kind
// jobs.StorageSchema otherwise.
func SkipMigrations() Option { return func(c *config) { c.skipMigrations = true } }

// MaxRetries bounds how often one call runs its transaction again after a
// deadlock, a lock wait timeout or a Galera certification failure, before
// it gives up with a *jobs.StorageError of kind jobs.StorageBusy (20 by
// default; at least 1). The pause between tries grows from about a
// millisecond to 100ms, with jitter.
func MaxRetries(n int) Option { return func(c *config) { c.maxRetries = max(n, 1) } }

// PollInterval is how often the store reads the jobs that Manager.Wait
// waits for, in one query for all of them (see NotifyClosed): 100ms by
// default. Jobs closed through this store wake their waiters at once.
func PollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.pollInterval = d
		}
	}
}

// ObserveRetry calls fn each time a call of the store runs its
// transaction again, with the store operation and the error that made it
// (a *jobs.StorageError of kind jobs.StorageBusy whose Code is the
// server's error number: 1213 for a deadlock or a Galera certification
// conflict, 1205 for a lock wait timeout, 1180 for a commit Galera
// refused). Use it for a counter; fn must be fast and safe for concurrent
// use.
func ObserveRetry(fn func(op string, err error)) Option {
	return func(c *config) { c.onRetry = fn }
}

func readOptions(opts []Option) config {
	cfg := config{maxRetries: 20, pollInterval: 100 * time.Millisecond}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// Open connects to MySQL or MariaDB and applies the schema (see
// Migrations). dsn is a go-sql-driver/mysql DSN naming the database, e.g.
// "app:secret@tcp(db:3306)/app". Each connection of the store's pool is
// set up as the store needs (strict SQL mode, READ COMMITTED, UTC, and
// wsrep_sync_wait on Galera; see the package documentation), and
// interpolates its arguments. A DSN the driver cannot parse is a
// *jobs.InputError. Close the store to close its pool.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	db, srv, err := openDB(ctx, dsn)
	if err != nil {
		return nil, err
	}
	s, err := newStore(ctx, db, srv, opts)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a store over the caller's database handle, opened with the
// go-sql-driver/mysql driver, and applies the schema. The caller keeps
// ownership of db. Its sessions must be strict (sql_mode with
// STRICT_TRANS_TABLES or STRICT_ALL_TABLES, as the servers have by
// default): otherwise New fails with an error matching ErrNotStrict. Give
// its DSN interpolateParams=true for one round trip per statement, and on
// Galera wsrep_sync_wait=1; the store reads and writes times in UTC
// whatever its parseTime and loc.
func New(ctx context.Context, db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, &jobs.InputError{Field: "db", Problem: "nil"}
	}
	srv, err := readServer(ctx, db)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, db, srv, opts)
}

func newStore(ctx context.Context, db *sql.DB, srv *server, opts []Option) (*Store, error) {
	s := &Store{db: db, srv: srv, cfg: readOptions(opts)}
	s.notify = newPoller(s, s.cfg.pollInterval)
	if err := s.checkSchema(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// DB returns the database handle the store reads and writes through.
func (s *Store) DB() *sql.DB { return s.db }

// Galera reports whether the store's server is a node of a Galera cluster.
func (s *Store) Galera() bool { return s.srv.galera }

// ServerVersion returns the server's version, as VERSION() reports it.
func (s *Store) ServerVersion() string { return s.srv.version }

// Close stops the poller of NotifyClosed and closes the pool if Open
// opened it; a handle passed to New stays open.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.notify.close()
		if s.owned {
			err = s.db.Close()
		}
	})
	return err
}

// inTx runs fn in a transaction of the store's and commits it, running the
// whole transaction again, up to MaxRetries times, when it ends in a
// deadlock, a lock wait timeout or a Galera certification failure: the
// server rolled it back whole, so each try starts from nothing. fn must
// only read and write through tx and set its results afresh on each try.
// An error of fn rolls the transaction back and is returned, as
// interpret maps it; fn returns nil to commit what it wrote, even when its
// answer to the caller is a refusal it recorded.
func (s *Store) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	for try := 0; ; try++ {
		err := s.runTx(ctx, fn)
		if err == nil || !retryable(err) || try+1 >= s.cfg.maxRetries {
			return interpret(op, err)
		}
		if err := s.retryPause(ctx, op, err, try); err != nil {
			return err
		}
	}
}

func (s *Store) runTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// retrying runs one statement (fn) again as inTx runs a transaction: a
// statement in autocommit mode is a transaction of its own.
func (s *Store) retrying(ctx context.Context, op string, fn func() error) error {
	for try := 0; ; try++ {
		err := fn()
		if err == nil || !retryable(err) || try+1 >= s.cfg.maxRetries {
			return interpret(op, err)
		}
		if err := s.retryPause(ctx, op, err, try); err != nil {
			return err
		}
	}
}

// retryPause reports a retry and waits before the next try: about 1ms
// doubling up to 100ms, each pause drawn at random between half and all
// of it, so that writers that collided do not collide again in step.
func (s *Store) retryPause(ctx context.Context, op string, err error, try int) error {
	if s.cfg.onRetry != nil {
		s.cfg.onRetry(op, interpret(op, err))
	}
	d := min(time.Millisecond<<min(try, 7), 100*time.Millisecond)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return interpret(op, ctx.Err())
	case <-t.C:
		return nil
	}
}

// errKeptChanging is the error of a call whose guarded write kept finding
// the rows changed by concurrent writers.
func errKeptChanging(op string) error {
	return jobs.NewStorageError(jobs.StorageBusy, op, "", errors.New("the rows kept changing under concurrent writes"))
}
