package jobs

import (
	"context"
)

// AppliedMigration is a row of the schema's version table.
type AppliedMigration struct {
	Version   int    `json:"version"`
	Name      string `json:"name"`
	AppliedAt string `json:"applied_at"` // RFC 3339, as recorded
}

// AppliedMigrations lists the migrations recorded in the store's database,
// oldest first; none if the database has no version table yet.
func (s *SQLStore) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	out, err := queryAll(ctx, s, s.rdb, "schema version", func(sc scanner) (AppliedMigration, error) {
		var m AppliedMigration
		err := sc.Scan(&m.Version, &m.Name, &m.AppliedAt)
		return m, err
	}, `SELECT version, name, applied_at FROM jobs_schema_migrations ORDER BY version`)
	if se, ok := err.(*StorageError); ok && se.Kind == StorageSchema {
		return nil, nil // no version table yet
	}
	return out, err
}

// InspectOnly opens a store without applying or checking the schema, for
// tools that report on a database whatever its version, such as jobsctl's
// schema command. Other operations may fail on a database at another
// schema version than this library's; use it for AppliedMigrations and
// DatabaseSchemaVersion.
func InspectOnly() StoreOption { return func(c *storeConfig) { c.inspectOnly = true } }
