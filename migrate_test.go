package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	rows, err := s.DB().Query(`SELECT version, name FROM jobs_schema_migrations ORDER BY version`)
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

// schemaV1 puts a database at schema version 1 by hand, as a first release
// of the library would have left it, with a finished job, a job whose
// attempt is unknown, and a pending job.
func writeSchemaV1(t testing.TB, db *sql.DB, dialect jobs.Dialect) {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	ts := func(s string) any {
		tm, _ := time.Parse(time.RFC3339, s)
		if dialect == "sqlite" {
			return tm.UnixMicro()
		}
		return tm
	}
	p := func(q string) string {
		if dialect == "sqlite" {
			return strings.NewReplacer("$", "?").Replace(q)
		}
		return q
	}
	stmts := []struct {
		q    string
		args []any
	}{
		{ms[0].SQL, nil}, // records version 1 in jobs_schema_migrations
		{p(`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count,
		      result, completed_by, created_at, updated_at, closed_at)
		    VALUES ('job_done', 'u', 'k-done', 'charge', 'stripe', '{"amount":1200}', $1, 'succeeded', 2, 1,
		      '{"ok":true}', 'att_done', $2, $2, $2)`),
			[]any{jobs.Fingerprint("charge", "stripe", json.RawMessage(`{"amount":1200}`)), ts("2025-06-01T10:00:00Z")}},
		{p(`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, provider_ref, created_at, updated_at, finished_at)
		    VALUES ('att_done', 'job_done', 1, 'stripe', 'succeeded', 1, 'ch_1', $1, $1, $1)`), []any{ts("2025-06-01T10:00:00Z")}},
		{p(`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, created_at, updated_at)
		    VALUES ('job_doubt', 'u', 'k-doubt', 'charge', 'stripe', '{"amount":5}', $1, 'running', 1, 1, $2, $2)`),
			[]any{jobs.Fingerprint("charge", "stripe", json.RawMessage(`{"amount":5}`)), ts("2025-06-01T11:00:00Z")}},
		{p(`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, reason, created_at, updated_at)
		    VALUES ('att_doubt', 'job_doubt', 1, 'stripe', 'unknown', 1, 'timeout', $1, $1)`), []any{ts("2025-06-01T11:00:00Z")}},
		{p(`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
		    VALUES ('job_new', 'u', 'k-new', 'charge', 'stripe', '{}', $1, 'pending', 1, $2, $2)`),
			[]any{jobs.Fingerprint("charge", "stripe", json.RawMessage(`{}`)), ts("2025-06-01T12:00:00Z")}},
	}
	for _, st := range stmts {
		if _, err := db.Exec(st.q, st.args...); err != nil {
			t.Fatalf("schema v1: %v\n%s", err, st.q)
		}
	}
}

// openUpgraded writes a database of dialect at an older schema version with
// write, as an older release left it, and opens a store on it, which
// migrates it.
func openUpgraded(t *testing.T, dialect jobs.Dialect, write func(testing.TB, *sql.DB, jobs.Dialect)) jobs.SQLStore {
	t.Helper()
	if dialect == "sqlite" {
		path := filepath.Join(t.TempDir(), "old.db")
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, db, dialect)
		db.Close()
		return testdb.NewSQLiteAt(t, path)
	}
	dsn := testdb.PostgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, dialect)
	db.Close()
	s, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.DB().SetMaxOpenConns(4)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestUpgradeFromSchemaV1 opens a database left at schema version 1 with
// data in it: opening migrates it, the data is intact, and the library works
// on it.
func TestUpgradeFromSchemaV1(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openUpgraded(t, dialect, writeSchemaV1)
			checkMigrationsRecorded(t, s)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}

			done, err := m.Get(ctx, "job_done")
			if err != nil || done.State != jobs.JobSucceeded || done.CompletedBy != "att_done" || string(done.Result) != `{"ok":true}` {
				t.Errorf("job_done after upgrade = %+v, %v", done, err)
			}
			if want := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC); !done.ClosedAt.Equal(want) {
				t.Errorf("job_done closed at %v, want %v", done.ClosedAt, want)
			}
			// Replays still find the old jobs by key.
			if j, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k-done", Kind: "charge", Provider: "stripe",
				Params: json.RawMessage(`{ "amount": 1200 }`)}); err != nil || created || j.ID != "job_done" {
				t.Errorf("replay of k-done = %s, %v, %v", j.ID, created, err)
			}
			// The unknown attempt still blocks, and can be resolved.
			if _, err := m.StartAttempt(ctx, "job_doubt", ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
				t.Errorf("attempt past the unknown one: err = %v, want ErrAttemptInFlight", err)
			}
			if _, err := m.Complete(ctx, "att_doubt", json.RawMessage(`{"late":true}`)); err != nil {
				t.Errorf("complete the unknown attempt: %v", err)
			}
			// The pending job takes attempts.
			a, err := m.StartAttempt(ctx, "job_new", "")
			if err != nil || a.Seq != 1 {
				t.Fatalf("start attempt on job_new = %+v, %v", a, err)
			}
			if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{}`)); err != nil {
				t.Errorf("complete job_new: %v", err)
			}
			// And the tables of version 2 exist.
			if _, err := s.DB().Exec(`SELECT COUNT(*) FROM job_verifications`); err != nil {
				t.Errorf("job_verifications after upgrade: %v", err)
			}
			checkNoViolations(t, s)
		})
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
			q := `INSERT INTO jobs_schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future.sql', 'now')`
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
