package jobs

import (
	"time"
)

// StoreOption configures how a store is opened.
type StoreOption func(*storeConfig)

type storeConfig struct {
	skipMigrations bool
	inspectOnly    bool    // neither apply nor check the schema; see InspectOnly
	listenDSN      *string // see ListenDSN
	onWriteWait    func(wait time.Duration)
}

// SkipMigrations leaves the schema to the caller's own migration tool (see
// Migrations). Opening then only checks that the database is at the schema
// version this library expects.
func SkipMigrations() StoreOption { return func(c *storeConfig) { c.skipMigrations = true } }

// ObserveWriteWait calls fn after each write of a SQLite store with how long
// the write waited for SQLite's write lock: from asking for it (before
// queueing behind other writers of this store and of other stores and
// processes on the file) until holding it, that is until its immediate
// transaction began, or, for a write of one statement, until the statement
// returned. Use it for a histogram; fn runs on the writer's goroutine and
// must be fast and safe for concurrent use. PostgreSQL stores, which have
// no lock for the whole database, ignore it.
func ObserveWriteWait(fn func(wait time.Duration)) StoreOption {
	return func(c *storeConfig) { c.onWriteWait = fn }
}

// ListenDSN gives the PostgreSQL store's listening connection (see
// Manager.Wait) settings of its own: a pgx connection string for a direct
// connection to the database, when the store's pool goes through a proxy
// that cannot carry LISTEN, such as PgBouncer in transaction pooling mode.
// Without it, the listening connection has the settings of the pool's
// connections; behind such a proxy Wait then polls, and the Manager logs a
// warning saying so. Behind a failover, give it the same hosts and
// target_session_attrs=read-write as the pool's DSN. A DSN that pgx cannot
// parse, or ListenDSN on SQLite, makes opening fail with ErrInvalidInput.
func ListenDSN(dsn string) StoreOption { return func(c *storeConfig) { c.listenDSN = &dsn } }

// InspectOnly opens a store without applying or checking the schema, for
// tools that report on a database whatever its version, such as jobsctl's
// schema command. Other operations may fail on a database at another
// schema version than this library's; use it for AppliedMigrations and
// DatabaseSchemaVersion.
func InspectOnly() StoreOption { return func(c *storeConfig) { c.inspectOnly = true } }

func readOptions(opts []StoreOption) storeConfig {
	var cfg storeConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}
