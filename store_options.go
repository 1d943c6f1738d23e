package jobs

import (
	"context"
	"fmt"
)

// StoreOption configures how a store is opened.
type StoreOption func(*storeConfig)

type storeConfig struct {
	skipMigrations bool
	inspectOnly    bool // neither apply nor check the schema; see InspectOnly
}

// SkipMigrations leaves the schema to the caller's own migration tool (see
// Migrations). Opening then only checks that the database is at the schema
// version this library expects.
func SkipMigrations() StoreOption { return func(c *storeConfig) { c.skipMigrations = true } }

// init applies the schema, or checks it when migrations are skipped.
func (s *SQLStore) init(ctx context.Context, opts []StoreOption) error {
	var cfg storeConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.inspectOnly {
		return nil
	}
	if !cfg.skipMigrations {
		return migrate(ctx, s.db, s.d)
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
