package jobs

import (
	"time"
)

// The options of the SQL stores are typed by the stores that take them, so
// that an option of one store given to the other does not compile: a
// PostgresOption for OpenPostgres and NewPostgresStore, a SQLiteOption for
// OpenSQLite and NewSQLiteStore, and a StoreOption, which is both, for
// what both stores do alike.

// PostgresOption configures how a PostgresStore is opened: ListenDSN,
// Schema, or a StoreOption.
type PostgresOption interface {
	applyPostgres(*postgresConfig)
}

// SQLiteOption configures how a SQLiteStore is opened: ObserveWriteWait,
// or a StoreOption.
type SQLiteOption interface {
	applySQLite(*sqliteConfig)
}

// StoreOption configures how either SQL store is opened: SkipMigrations or
// InspectOnly. It is both a PostgresOption and a SQLiteOption.
type StoreOption func(*storeConfig)

var (
	_ PostgresOption = StoreOption(nil)
	_ SQLiteOption   = StoreOption(nil)
)

func (o StoreOption) applyPostgres(c *postgresConfig) { o(&c.storeConfig) }
func (o StoreOption) applySQLite(c *sqliteConfig)     { o(&c.storeConfig) }

// postgresOption is an option of the PostgreSQL store only.
type postgresOption func(*postgresConfig)

func (o postgresOption) applyPostgres(c *postgresConfig) { o(c) }

// sqliteOption is an option of the SQLite store only.
type sqliteOption func(*sqliteConfig)

func (o sqliteOption) applySQLite(c *sqliteConfig) { o(c) }

// storeConfig is what the options of both stores set.
type storeConfig struct {
	skipMigrations bool
	inspectOnly    bool // neither apply nor check the schema; see InspectOnly
}

// postgresConfig is what a PostgresStore's options set.
type postgresConfig struct {
	storeConfig
	listenDSN *string // see ListenDSN
	schema    *string // see Schema
}

// sqliteConfig is what a SQLiteStore's options set.
type sqliteConfig struct {
	storeConfig
	onWriteWait func(wait time.Duration) // see ObserveWriteWait
}

// SkipMigrations leaves the schema to the caller's own migration tool (see
// Migrations). Opening then only checks that the database is at the schema
// version this library expects.
func SkipMigrations() StoreOption { return func(c *storeConfig) { c.skipMigrations = true } }

// InspectOnly opens a store without applying or checking the schema, for
// tools that report on a database whatever its version, such as jobsctl's
// schema command. Other operations may fail on a database at another
// schema version than this library's; use it for AppliedMigrations and
// DatabaseSchemaVersion.
func InspectOnly() StoreOption { return func(c *storeConfig) { c.inspectOnly = true } }

// ListenDSN gives the PostgreSQL store's listening connection (see
// Manager.Wait) settings of its own: a pgx connection string for a direct
// connection to the database, when the store's pool goes through a proxy
// that cannot carry LISTEN, such as PgBouncer in transaction pooling mode.
// Without it, the listening connection has the settings of the pool's
// connections; behind such a proxy Wait then polls, and the Manager logs a
// warning saying so. Behind a failover, give it the same hosts and
// target_session_attrs=read-write as the pool's DSN. A DSN that pgx cannot
// parse makes opening fail with ErrInvalidInput.
func ListenDSN(dsn string) PostgresOption {
	return postgresOption(func(c *postgresConfig) { c.listenDSN = &dsn })
}

// Schema puts the PostgreSQL store's tables in the schema name, which
// opening creates if it is missing, and qualifies every statement the
// store runs with it. Without it, the tables are where the connection's
// search_path finds them (and opening creates them in the first schema
// it names), as a plain run of the migration files would.
//
// With Schema, the library's tables stay apart from the application's
// even inside the application's own transactions: SubmitTx and
// SubmitPgxTx write to the store's schema whatever the transaction's
// search_path. Waiters listen on a channel of the schema's own, so that
// stores in two schemas of one database do not wake each other's. Open
// every store that shares the tables with the same name, and point
// migration tools at the same schema (goose's and golang-migrate's
// connections with search_path=name). A name that is empty, longer than
// PostgreSQL's 63 bytes, or holds a NUL makes opening fail with
// ErrInvalidInput.
func Schema(name string) PostgresOption {
	return postgresOption(func(c *postgresConfig) { c.schema = &name })
}

// ObserveWriteWait calls fn after each write of a SQLite store with how long
// the write waited for SQLite's write lock: from asking for it (before
// queueing behind other writers of this store and of other stores and
// processes on the file) until holding it, that is until its immediate
// transaction began, or, for a write of one statement, until the statement
// returned. Use it for a histogram; fn runs on the writer's goroutine and
// must be fast and safe for concurrent use.
func ObserveWriteWait(fn func(wait time.Duration)) SQLiteOption {
	return sqliteOption(func(c *sqliteConfig) { c.onWriteWait = fn })
}

func readPostgresOptions(opts []PostgresOption) postgresConfig {
	var cfg postgresConfig
	for _, o := range opts {
		if o != nil {
			o.applyPostgres(&cfg)
		}
	}
	return cfg
}

func readSQLiteOptions(opts []SQLiteOption) sqliteConfig {
	var cfg sqliteConfig
	for _, o := range opts {
		if o != nil {
			o.applySQLite(&cfg)
		}
	}
	return cfg
}
