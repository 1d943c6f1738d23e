package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// schema fails when the database is at another version than jobsctl, so
// that a deploy script can stop on it, and its status line says which way.
func TestSchemaExitStatusSaysBehindOrAhead(t *testing.T) {
	t.Parallel()
	future := time.Now().UTC().Format(time.RFC3339Nano)
	steps := []struct {
		name   string
		sql    string // run before, with $1 the last version
		code   int
		status string
	}{
		{"up to date", "", 0, "status    up to date\n"},
		{"ahead", `INSERT INTO intentjobs_schema_migrations (version, name, applied_at) VALUES ($1 + 1, 'from a newer release', '` + future + `')`,
			1, "status    ahead: the database was upgraded by a newer release; use a newer jobsctl\n"},
		{"behind", `DELETE FROM intentjobs_schema_migrations WHERE version >= $1`,
			1, "status    behind: LAST missing; run jobsctl migrate"}, // LAST: the newest migration
	}
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			last := lastVersion(t, jobs.Dialect(db.name))
			for _, st := range steps {
				if st.sql != "" {
					db.exec(t, st.sql, last)
				}
				jobsctl(t, nil, db.args("schema")...).want(t, st.code, strings.ReplaceAll(st.status, "LAST", lastMigration(t, jobs.Dialect(db.name))))

				r := jobsctl(t, nil, db.args("schema", "--json")...)
				r.want(t, st.code)
				var rep schemaReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Status != st.name {
					t.Errorf("%s: schema --json status %q, %v\n%s", st.name, rep.Status, err, r.stdout)
				}
			}
		})
	}
}

// lastMigration is the name of the dialect's newest migration.
func lastMigration(t *testing.T, dialect jobs.Dialect) string {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Name
}

// lastVersion is the version of the dialect's newest migration.
func lastVersion(t *testing.T, dialect jobs.Dialect) int {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}

// TestPostgresSchemaFlag: with --postgres-schema, jobsctl works on the
// tables a service opened with jobs.Schema keeps in that schema, whatever
// the DSN's search_path; migrate makes the schema and its tables.
func TestPostgresSchemaFlag(t *testing.T) {
	t.Parallel()
	dsn := testdb.PostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := make([]byte, 6)
	rand.Read(b)
	lib := "intentjobs_ctl_" + hex.EncodeToString(b)
	t.Cleanup(func() { db.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+lib+` CASCADE`) })
	args := func(a ...string) []string { return append([]string{"--postgres", dsn, "--postgres-schema", lib}, a...) }

	// Before migrate: no such schema yet, so no schema version.
	jobsctl(t, nil, args("schema")...).want(t, 1, "schema version 0")
	jobsctl(t, nil, args("migrate")...).want(t, 0, "up to date")
	s, err := jobs.OpenPostgres(context.Background(), dsn, jobs.Schema(lib), jobs.SkipMigrations())
	if err != nil {
		t.Fatalf("open the schema jobsctl migrated: %v", err)
	}
	defer s.Close()
	seeded := seed(t, s)
	jobsctl(t, nil, args("show", seeded.doubt.ID)...).want(t, 0, seeded.doubt.ID)
	jobsctl(t, nil, args("check")...).want(t, 0, "checked")
	// The DSN's own schema holds nothing.
	jobsctl(t, nil, "--postgres", dsn, "schema").want(t, 1, "schema version 0")
	jobsctl(t, nil, "--sqlite", filepath.Join(t.TempDir(), "jobs.db"), "--postgres-schema", lib, "migrate").
		wantError(t, 2, "--postgres-schema is for a PostgreSQL database")
}

// TestMigrateUpgradesADevelopmentDatabase: jobsctl migrate upgrades a
// SQLite database that the library's last development version left, as
// opening a store does.
func TestMigrateUpgradesADevelopmentDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dev.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "dev-migrations", "sqlite", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("development migrations: %v, %v", files, err)
	}
	for _, f := range files { // in name order, which is version order
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	db.Close()
	jobsctl(t, nil, "--sqlite", path, "migrate").want(t, 0, "up to date", "0001_init.sql")
	jobsctl(t, nil, "--sqlite", path, "check").want(t, 0, "0 jobs and 0 attempts checked")
}
