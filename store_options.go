package jobs

import (
	"context"
	"fmt"
	"time"
)

// StoreOption configures how a store is opened.
type StoreOption func(*storeConfig)

type storeConfig struct {
	skipMigrations bool
	inspectOnly    bool // neither apply nor check the schema; see InspectOnly
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

// init applies the schema, or checks it when migrations are skipped.
func (s *SQLStore) init(ctx context.Context, opts []StoreOption) error {
	var cfg storeConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s.d.writeLock {
		s.onWriteWait = cfg.onWriteWait
	}
	if cfg.inspectOnly {
		return nil
	}
	if !cfg.skipMigrations {
		return migrate(ctx, s.db, s.d, s.queue)
	}
	v, err := s.DatabaseSchemaVersion(ctx)
	if err != nil {
		return err
	}
	if want := SchemaVersion(); v != want {
		return &StorageError{Op: "open", Kind: StorageSchema,
			Message: fmt.Sprintf("database schema is version %d; this library needs %d", v, want)}
	}
	return nil
}
