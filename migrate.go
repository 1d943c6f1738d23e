package jobs

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrationFiles embed.FS

// Migration is one numbered step of the schema.
type Migration struct {
	Version int    // 1, 2, …
	Name    string // file name, e.g. "0001_init.sql"
	SQL     string
}

// Migrations returns the schema of dialect ("postgres" or "sqlite") as
// numbered plain-SQL files (0001_init.sql, …), for migration tools that
// prefer to apply it themselves. Opening a store applies them too.
func Migrations(dialect string) (fs.FS, error) {
	switch dialect {
	case "postgres", "sqlite":
		return fs.Sub(migrationFiles, path.Join("migrations", dialect))
	}
	return nil, fmt.Errorf("jobs: unknown dialect %q (want postgres or sqlite)", dialect)
}

// MigrationList returns the migrations of dialect in order.
func MigrationList(dialect string) ([]Migration, error) {
	fsys, err := Migrations(dialect)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("jobs: migration %s: name must start with its number", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("jobs: migration %s: expected version %d", m.Name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this library knows.
func SchemaVersion() int {
	ms, err := MigrationList("sqlite")
	if err != nil {
		panic(err) // the embedded files are part of the build
	}
	return len(ms)
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS jobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
)`

// migrateBusyBudget bounds how long migrate retries a database that stays
// busy, when ctx has no deadline of its own.
const migrateBusyBudget = 30 * time.Second

// migrate applies the missing migrations of d on db, in one transaction
// under a lock that makes concurrent openers wait for each other: an advisory
// lock on PostgreSQL (per schema), an immediate transaction on SQLite. It
// refuses a database whose schema is newer than this library.
//
// On SQLite, the migration waits its turn in q, the store's write queue,
// like any write. The first connections to a new file race to convert it to
// WAL, and SQLite answers that conversion with "database is locked" at once,
// without waiting for its busy timeout; so a busy migration, which has
// written nothing, is tried again, for up to migrateBusyBudget.
func migrate(ctx context.Context, db *sql.DB, d *dialect, q *writeQueue) error {
	if d.retry == nil {
		return migrateOnce(ctx, db, d)
	}
	ctx, cancel := context.WithTimeout(ctx, migrateBusyBudget)
	defer cancel()
	if err := q.lock(ctx); err != nil {
		return d.interpret("migrate", err)
	}
	defer q.unlock()
	return retryWhile(ctx, d.retry, func() error { return migrateOnce(ctx, db, d) })
}

func migrateOnce(ctx context.Context, db *sql.DB, d *dialect) (err error) {
	ms, err := MigrationList(d.name)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return d.interpret("migrate", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, d.beginMigrate); err != nil {
		return d.interpret("migrate", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if d.lockMigrate != "" {
		if _, err := conn.ExecContext(ctx, d.lockMigrate); err != nil {
			return d.interpret("migrate", err)
		}
	}
	if _, err := conn.ExecContext(ctx, migrationsTable); err != nil {
		return d.interpret("migrate", err)
	}
	var current int
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM jobs_schema_migrations`).Scan(&current); err != nil {
		return d.interpret("migrate", err)
	}
	if current > len(ms) {
		return &StorageError{Op: "migrate", Kind: StorageSchema,
			Message: fmt.Sprintf("database schema is version %d, newer than this library's %d; upgrade the library", current, len(ms))}
	}
	for _, m := range ms[current:] {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return d.interpret("migrate "+m.Name, err)
		}
		if _, err := conn.ExecContext(ctx, d.rebind(`INSERT INTO jobs_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
			m.Version, m.Name, nowText()); err != nil {
			return d.interpret("migrate "+m.Name, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return d.interpret("migrate", err)
	}
	return nil
}

// DatabaseSchemaVersion reports the schema version recorded in the store's
// database (0 if none).
func (s *SQLStore) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM jobs_schema_migrations`).Scan(&v)
	if err != nil {
		return 0, s.d.interpret("schema version", err)
	}
	return v, nil
}
