package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// TestConcurrentOpensMigrateOnce opens ten stores on one empty database at
// once, as ten processes starting together would: every open succeeds, and
// each migration is applied, and recorded, exactly once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	const openers = 10
	cases := []struct {
		name string
		open func(t *testing.T) func() (jobs.SQLStore, error)
	}{
		{"sqlite", func(t *testing.T) func() (jobs.SQLStore, error) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return func() (jobs.SQLStore, error) { return jobs.OpenSQLite(context.Background(), path) }
		}},
		{"sqlite-handles", func(t *testing.T) func() (jobs.SQLStore, error) {
			// The caller's own handles, without a busy timeout: the lock
			// must still be waited for.
			path := filepath.Join(t.TempDir(), "jobs.db")
			return func() (jobs.SQLStore, error) {
				db, err := sql.Open("sqlite3", path)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { db.Close() })
				return jobs.NewSQLiteStore(context.Background(), db)
			}
		}},
		{"postgres", func(t *testing.T) func() (jobs.SQLStore, error) {
			dsn := testdb.PostgresDSN(t)
			return func() (jobs.SQLStore, error) {
				// A pool of its own per opener, like a process.
				db, err := sql.Open("pgx", dsn)
				if err != nil {
					return nil, err
				}
				db.SetMaxOpenConns(1)
				t.Cleanup(func() { db.Close() })
				return jobs.NewPostgresStore(context.Background(), db)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			open := tc.open(t)
			stores := make([]jobs.SQLStore, openers)
			errs := make([]error, openers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range openers {
				wg.Go(func() {
					<-start
					stores[i], errs[i] = open()
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("opener %d: %v", i, err)
				}
				t.Cleanup(func() { stores[i].Close() })
			}
			checkMigrationsRecorded(t, stores[0])
			// All of them work on the one schema.
			ctx := context.Background()
			first := submitOK(t, jobstest.NewManager(t, stores[3], jobs.Options{}), chargeReq("u", "k"))
			again, created, err := jobstest.NewManager(t, stores[7], jobs.Options{}).Submit(ctx, chargeReq("u", "k"))
			if err != nil || created || again.ID != first.ID {
				t.Errorf("submit through another store = %s, %v, %v; want %s replayed", again.ID, created, err, first.ID)
			}
		})
	}
}

// assertMigrations checks that every migration is recorded once, in order.
func checkMigrationsRecorded(t testing.TB, s jobs.SQLStore) {
	t.Helper()
	ms, err := jobs.MigrationList(s.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.DB().Query(`SELECT version, name FROM intentjobs_schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		got = append(got, name)
	}
	var want []string
	for _, m := range ms {
		want = append(want, m.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("recorded migrations %v, want %v", got, want)
	}
	v, err := s.DatabaseSchemaVersion(context.Background())
	if err != nil || v != len(ms) {
		t.Errorf("DatabaseSchemaVersion = %d, %v; want %d", v, err, len(ms))
	}
}

// TestNewerSchemaRefused opens a database whose schema was upgraded by a
// newer library: the open is refused with a schema error, with or without
// migrations, and nothing is written.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		open func(t *testing.T) (first jobs.SQLStore, reopen func(...jobs.StoreOption) (jobs.SQLStore, error))
	}{
		{"sqlite", func(t *testing.T) (jobs.SQLStore, func(...jobs.StoreOption) (jobs.SQLStore, error)) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return testdb.NewSQLiteAt(t, path), func(o ...jobs.StoreOption) (jobs.SQLStore, error) {
				return jobs.OpenSQLite(context.Background(), path, sqliteOptions(o)...)
			}
		}},
		{"postgres", func(t *testing.T) (jobs.SQLStore, func(...jobs.StoreOption) (jobs.SQLStore, error)) {
			dsn := testdb.PostgresDSN(t)
			s, err := jobs.OpenPostgres(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func(o ...jobs.StoreOption) (jobs.SQLStore, error) {
				return jobs.OpenPostgres(context.Background(), dsn, postgresOptions(o)...)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, reopen := tc.open(t)
			future := jobs.SchemaVersion() + 1
			q := `INSERT INTO intentjobs_schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future.sql', 'now')`
			if s.Dialect() == "sqlite" {
				q = strings.Replace(q, "$1", "?", 1)
			}
			if _, err := s.DB().Exec(q, future); err != nil {
				t.Fatal(err)
			}
			for _, opts := range [][]jobs.StoreOption{nil, {jobs.SkipMigrations()}} {
				got, err := reopen(opts...)
				if err == nil {
					got.Close()
					t.Fatalf("open with options %d: no error on a schema newer than the library", len(opts))
				}
				var se *jobs.StorageError
				if !errors.Is(err, jobs.ErrStorage) || !errors.As(err, &se) || se.Kind != jobs.StorageSchema {
					t.Fatalf("open: err = %#v, want a StorageError of kind schema", err)
				}
				for _, want := range []string{"version", "newer", "library"} {
					if len(opts) == 0 && !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
			}
			v, err := s.DatabaseSchemaVersion(context.Background())
			if err != nil || v != future {
				t.Errorf("version after refused opens = %d, %v; want %d untouched", v, err, future)
			}
		})
	}
}

// TestOpenNewSQLiteFileRace opens fresh SQLite files from many stores at
// once: the first connections race to convert each file to WAL, which
// SQLite refuses at once ("database is locked") instead of waiting for its
// busy timeout. Every open must still succeed.
func TestOpenNewSQLiteFileRace(t *testing.T) {
	t.Parallel()
	const files, openers = 20, 12
	dir := t.TempDir()
	for f := range files {
		path := filepath.Join(dir, fmt.Sprintf("jobs%d.db", f))
		var wg sync.WaitGroup
		errs := make(chan error, openers)
		start := make(chan struct{})
		for range openers {
			wg.Go(func() {
				<-start
				s, err := jobs.OpenSQLite(context.Background(), path)
				if err != nil {
					errs <- err
					return
				}
				s.Close()
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("file %d: %v", f, err)
		}
	}
}

// SkipMigrations on a database the schema was never applied to says so,
// and how to apply it, and creates nothing.
func TestSkipMigrationsOnAnEmptyDatabaseSaysHowToApplyTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (jobs.SQLStore, error)
	}{
		{"sqlite", func(t *testing.T) (jobs.SQLStore, error) {
			return jobs.OpenSQLite(ctx, filepath.Join(t.TempDir(), "empty.db"), jobs.SkipMigrations())
		}},
		{"postgres", func(t *testing.T) (jobs.SQLStore, error) {
			return jobs.OpenPostgres(ctx, testdb.PostgresDSN(t), jobs.SkipMigrations())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := tc.open(t)
			if err == nil {
				s.Close()
				t.Fatal("SkipMigrations on an empty database opened")
			}
			var se *jobs.StorageError
			if !errors.As(err, &se) || se.Kind != jobs.StorageSchema {
				t.Fatalf("err = %v; want a StorageError of kind schema", err)
			}
			for _, want := range []string{"no jobs schema", "jobs.Migrations", "jobsctl migrate", "without SkipMigrations"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "does not exist") {
				t.Errorf("error %q speaks of a missing table, not of the schema", err)
			}
		})
	}
}

// sqliteOptions and postgresOptions pass options of both stores to one.
func sqliteOptions(opts []jobs.StoreOption) []jobs.SQLiteOption {
	out := make([]jobs.SQLiteOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func postgresOptions(opts []jobs.StoreOption) []jobs.PostgresOption {
	out := make([]jobs.PostgresOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}
