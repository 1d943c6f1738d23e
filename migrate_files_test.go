package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// emptyDatabase returns a handle on an empty database of dialect, without
// the library's schema, as a migration tool finds it.
func emptyDatabase(t *testing.T, dialect jobs.Dialect) *sql.DB {
	t.Helper()
	driver, dsn := "sqlite3", filepath.Join(t.TempDir(), "jobs.db")
	if dialect == "postgres" {
		driver, dsn = "pgx", testdb.PostgresDSN(t)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openSkippingMigrations opens a store of dialect over db that only checks
// the schema's version.
func openSkippingMigrations(ctx context.Context, db *sql.DB, dialect jobs.Dialect) (jobs.SQLStore, error) {
	if dialect == "postgres" {
		return jobs.NewPostgresStore(ctx, db, jobs.SkipMigrations())
	}
	return jobs.NewSQLiteStore(ctx, db, jobs.SkipMigrations())
}

// TestMigrationFilesRunInOrderRecordTheirVersion runs each file of
// Migrations with a plain Exec, in order, as psql or any migration tool
// does: each file records its own version, so that opening with
// SkipMigrations then finds the database at the library's version, and the
// library works on it.
func TestMigrationFilesRunInOrderRecordTheirVersion(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := emptyDatabase(t, dialect)
			ms, err := jobs.MigrationList(dialect)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if _, err := db.ExecContext(ctx, m.SQL); err != nil {
					t.Fatalf("exec %s: %v", m.Name, err)
				}
				var v int
				if err := db.QueryRowContext(ctx, `SELECT MAX(version) FROM intentjobs_schema_migrations`).Scan(&v); err != nil || v != m.Version {
					t.Fatalf("after %s the recorded version is %d (%v), want %d", m.Name, v, err, m.Version)
				}
			}
			s, err := openSkippingMigrations(ctx, db, dialect)
			if err != nil {
				t.Fatalf("open with SkipMigrations after the files ran: %v", err)
			}
			checkMigrationsRecorded(t, s)
			m := jobstest.NewManager(t, s, jobs.Options{Logger: discard})
			j := submitOK(t, m, chargeReq("u", "k"))
			runToSuccess(t, m, j)
			if got, err := m.Get(ctx, j.ID); err != nil || got.State != jobs.JobSucceeded {
				t.Errorf("job after Complete = %s, %v; want succeeded", got.State, err)
			}
		})
	}
}

// TestMigrationsForGolangMigrate checks the layouts of MigrationsFor:
// golang-migrate's names (NNNN_name.up.sql) for the very SQL of Migrations,
// served by a well-behaved fs.FS, and bad input refused.
func TestMigrationsForGolangMigrate(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ms, err := jobs.MigrationList(dialect)
			if err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				layout jobs.MigrationLayout
				name   func(jobs.Migration) string
			}{
				{jobs.PlainSQL, func(m jobs.Migration) string { return m.Name }},
				{jobs.GolangMigrate, func(m jobs.Migration) string { return strings.TrimSuffix(m.Name, ".sql") + ".up.sql" }},
			}
			for _, c := range cases {
				fsys, err := jobs.MigrationsFor(dialect, c.layout)
				if err != nil {
					t.Fatalf("layout %d: %v", c.layout, err)
				}
				var want []string
				for _, m := range ms {
					want = append(want, c.name(m))
					b, err := fs.ReadFile(fsys, c.name(m))
					if err != nil || string(b) != m.SQL {
						t.Errorf("layout %d: %s differs from %s (%v)", c.layout, c.name(m), m.Name, err)
					}
				}
				entries, err := fs.ReadDir(fsys, ".")
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range entries {
					got = append(got, e.Name())
				}
				if !slices.Equal(got, want) {
					t.Errorf("layout %d: files %v, want %v", c.layout, got, want)
				}
				if err := fstest.TestFS(fsys, want...); err != nil {
					t.Errorf("layout %d: %v", c.layout, err)
				}
			}
		})
	}
	for _, bad := range []struct {
		dialect jobs.Dialect
		layout  jobs.MigrationLayout
	}{{"mysql", jobs.PlainSQL}, {"mysql", jobs.GolangMigrate}, {"sqlite", jobs.MigrationLayout(7)}} {
		if _, err := jobs.MigrationsFor(bad.dialect, bad.layout); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("MigrationsFor(%q, %d): err = %v, want ErrInvalidInput", bad.dialect, bad.layout, err)
		}
	}
}

// TestMigrationFilesCarryGooseAnnotations keeps every migration readable
// by goose (compat/ runs the real goose on them): a file starts with its
// Up annotation, and a statement with a dollar-quoted body, whose inner
// semicolons would split it, stands between StatementBegin and
// StatementEnd.
func TestMigrationFilesCarryGooseAnnotations(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		ms, err := jobs.MigrationList(dialect)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.SQL, "-- +goose Up\n") {
				t.Errorf("%s/%s does not start with -- +goose Up", dialect, m.Name)
			}
			inBlock := false
			for i, line := range strings.Split(m.SQL, "\n") {
				switch strings.TrimSpace(line) {
				case "-- +goose StatementBegin":
					inBlock = true
				case "-- +goose StatementEnd":
					inBlock = false
				}
				if strings.Contains(line, "$$") && !inBlock {
					t.Errorf("%s/%s:%d: a dollar-quoted body outside -- +goose StatementBegin/End", dialect, m.Name, i+1)
				}
			}
		}
	}
}
