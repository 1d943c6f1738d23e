package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing/fstest"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the schema as numbered plain-SQL files
// (0001_init.sql, …), for migration tools that apply it themselves;
// opening a store applies them too. Each file records its version in the
// table intentjobs_schema_migrations, so that a database migrated by any
// tool opens with SkipMigrations. The files carry goose's annotations,
// which other runners read as comments. Each statement stands alone, so
// goose runs them one by one; golang-migrate sends a file whole, which
// needs multiStatements=true in its DSN.
//
// There are no down migrations: undoing the schema would drop the jobs
// that bind idempotency keys to their outcome.
func Migrations() fs.FS {
	fsys, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded folder is part of the build
	}
	return fsys
}

// MigrationsFor returns the schema as files named for a migration tool:
// as Migrations for jobs.PlainSQL (goose), NNNN_name.up.sql for
// jobs.GolangMigrate. Another layout is a *jobs.InputError.
func MigrationsFor(layout jobs.MigrationLayout) (fs.FS, error) {
	switch layout {
	case jobs.PlainSQL:
		return Migrations(), nil
	case jobs.GolangMigrate:
		ms := MigrationList()
		files := make(fstest.MapFS, len(ms))
		for _, m := range ms {
			files[strings.TrimSuffix(m.Name, ".sql")+".up.sql"] = &fstest.MapFile{Data: []byte(m.SQL), Mode: 0o444}
		}
		return files, nil
	}
	return nil, &jobs.InputError{Field: "layout", Problem: fmt.Sprintf("%d is none of PlainSQL, GolangMigrate", layout)}
}

// MigrationList returns the migrations in order.
func MigrationList() []jobs.Migration {
	entries, err := fs.ReadDir(Migrations(), ".")
	if err != nil {
		panic(err)
	}
	var out []jobs.Migration
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			panic("jobs/mysql: migration " + e.Name() + ": name must start with its number")
		}
		b, err := fs.ReadFile(Migrations(), e.Name())
		if err != nil {
			panic(err)
		}
		out = append(out, jobs.Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// SchemaVersion is the schema version this package needs: the number of
// its migrations.
func SchemaVersion() int { return len(MigrationList()) }

// statements splits a migration into its statements: each ends with a
// semicolon at the end of a line. Comment lines go.
func statements(script string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(script) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// checkSchema applies the migrations the database is missing, or with
// SkipMigrations only checks that it is at this package's version.
func (s *Store) checkSchema(ctx context.Context) error {
	if s.cfg.skipMigrations {
		v, err := s.DatabaseSchemaVersion(ctx)
		if err != nil {
			return err
		}
		if v != SchemaVersion() {
			return jobs.NewStorageError(jobs.StorageSchema, "open", "", fmt.Errorf("the database's jobs schema is "+
				"version %d; this package needs %d (SkipMigrations leaves the schema to you: apply mysql.Migrations "+
				"with your migration tool, or open the store without SkipMigrations)", v, SchemaVersion()))
		}
		return nil
	}
	return s.migrate(ctx)
}

// migrate applies the missing migrations on one connection, under a named
// lock (GET_LOCK) that makes concurrent openers of the database wait for
// each other. Galera does not replicate named locks (MariaDB refuses
// GET_LOCK there): the files are safe to run twice at once anyway, since
// every table is made with IF NOT EXISTS in one statement, every column
// and index is added by one ALTER TABLE only where it is missing (and an
// ALTER TABLE that finds it added meanwhile is taken as done), and the
// version row is inserted once. MySQL commits each DDL statement by itself, so a
// migration cannot run in one transaction; one that stopped half way runs
// again from its start.
func (s *Store) migrate(ctx context.Context) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return interpret("migrate", err)
	}
	defer conn.Close()
	var got any
	err = conn.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('intentjobs.migrate.', DATABASE()), 60)`).Scan(&got)
	var me *gomysql.MySQLError
	switch {
	case err == nil:
		if fmt.Sprint(got) != "1" {
			return jobs.NewStorageError(jobs.StorageBusy, "migrate", "", errors.New("another opener held the migration lock for 60s"))
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `DO RELEASE_LOCK(CONCAT('intentjobs.migrate.', DATABASE()))`)
	case errors.As(err, &me) && me.Number == erNotSupportedYet:
	default:
		return interpret("migrate", err)
	}
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return err
	}
	ms := MigrationList()
	if current > len(ms) {
		return jobs.NewStorageError(jobs.StorageSchema, "migrate", "", fmt.Errorf("the database's jobs schema is "+
			"version %d, newer than this package's %d; upgrade the package", current, len(ms)))
	}
	for _, m := range ms[current:] {
		for _, stmt := range statements(m.SQL) {
			err := s.retrying(ctx, "migrate "+m.Name, func() error {
				_, err := conn.ExecContext(ctx, stmt)
				if addedMeanwhile(err) {
					return nil
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		v, err := schemaVersion(ctx, conn)
		if err != nil {
			return err
		}
		if v != m.Version {
			return jobs.NewStorageError(jobs.StorageSchema, "migrate "+m.Name, "", fmt.Errorf("the migration left the "+
				"schema at version %d instead of recording version %d", v, m.Version))
		}
	}
	return nil
}

// addedMeanwhile reports whether err is an ALTER TABLE's refusal to add a
// column or an index that exists: on Galera, where the migration lock is
// not held, another opener added it between this one's check and its
// ALTER TABLE, and the migration goes on as if this one had.
func addedMeanwhile(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == erDupFieldName || me.Number == erDupKeyName)
}

// rowQueryer is what *sql.DB and *sql.Conn have in common.
type rowQueryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion reads the schema version recorded in the database: 0 if
// it has no version table yet.
func schemaVersion(ctx context.Context, q rowQueryer) (int, error) {
	var v int
	err := q.QueryRowContext(ctx, qSchemaVersion).Scan(&v)
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == erNoSuchTable {
		return 0, nil
	}
	return v, interpret("schema version", err)
}

// DatabaseSchemaVersion reports the schema version recorded in the
// database (0 if none).
func (s *Store) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.db)
}

// AppliedMigrations lists the migrations recorded in the database, oldest
// first; none if it has no version table yet.
func (s *Store) AppliedMigrations(ctx context.Context) ([]jobs.AppliedMigration, error) {
	out, err := queryAll(ctx, s.db, "schema version", func(sc scanner) (jobs.AppliedMigration, error) {
		var m jobs.AppliedMigration
		return m, sc.Scan(&m.Version, &m.Name, &m.AppliedAt)
	}, qAppliedMigrations)
	var se *jobs.StorageError
	if errors.As(err, &se) && se.Kind == jobs.StorageSchema {
		return nil, nil
	}
	return out, err
}
