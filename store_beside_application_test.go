package jobs_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// The application's own tables, of the commonest names, which the
// library's must not take: a table of jobs, one of job attempts, and one
// named as the library's development versions named their version table
// (which an upgrade must not take for theirs).
const applicationTables = `
CREATE TABLE jobs (id text PRIMARY KEY, title text NOT NULL);
CREATE TABLE job_attempts (id text PRIMARY KEY, job_id text NOT NULL REFERENCES jobs (id));
CREATE TABLE jobs_schema_migrations (version integer PRIMARY KEY)`

// newSchema makes a schema of its own for t in the PostgreSQL test database,
// dropped when t ends, and returns its name.
func newSchema(t testing.TB, admin *sql.DB, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE SCHEMA ` + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// submitWithApplicationRow writes the application's row of jobs and submits
// a job of the library's in the same transaction of the application's,
// then commits or rolls back.
func submitWithApplicationRow(t *testing.T, m *jobs.Manager, db *sql.DB, key string, commit bool) jobs.Job {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, title) VALUES ('`+key+`', 'the application''s')`); err != nil {
		t.Fatal(err)
	}
	j, created, err := m.SubmitTx(ctx, tx, txRequest(key))
	if err != nil || !created {
		t.Fatalf("SubmitTx in the application's transaction = %v, %v", created, err)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	} else if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	return j
}

// checkTogether checks that the application's row and the library's job of
// key both exist (want) or neither does.
func checkTogether(t *testing.T, m *jobs.Manager, db *sql.DB, key string, want bool) {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE id = '` + key + `'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	_, err := m.GetByKey(context.Background(), "o", key)
	switch {
	case want && (n != 1 || err != nil):
		t.Errorf("after commit: %d application rows, library's job %v; want both", n, err)
	case !want && (n != 0 || !errors.Is(err, jobs.ErrNotFound)):
		t.Errorf("after rollback: %d application rows, library's job %v; want neither", n, err)
	}
}

// TestPostgresBesideApplicationTables: in a schema where the application
// has its own jobs and job_attempts, opening a store succeeds, and SubmitTx
// in the application's transaction (its search_path the application's
// schema) writes the library's job and the application's row together, or
// neither.
func TestPostgresBesideApplicationTables(t *testing.T) {
	t.Parallel()
	dsn := testdb.PostgresDSN(t)
	app, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	if _, err := app.Exec(applicationTables); err != nil {
		t.Fatal(err)
	}
	s, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open beside the application's tables: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	m := jobstest.NewManager(t, s, jobs.Options{Logger: discard})
	submitWithApplicationRow(t, m, app, "kept", true)
	checkTogether(t, m, app, "kept", true)
	submitWithApplicationRow(t, m, app, "dropped", false)
	checkTogether(t, m, app, "dropped", false)
	runToSuccess(t, m, submitOK(t, m, chargeReq("u", "k")))
	checkNoViolations(t, s)
}

// TestPostgresSchemaOption: a store opened with Schema puts its tables in
// that schema, which opening makes, and reaches them whatever the
// connection's search_path: SubmitTx and SubmitPgxTx in the application's
// transaction, whose search_path is the application's schema alone (with
// its own jobs table), write the library's job in the store's schema,
// together with the application's row or not at all.
func TestPostgresSchemaOption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.PostgresDSN(t) // the application's schema
	app, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	if _, err := app.Exec(applicationTables); err != nil {
		t.Fatal(err)
	}
	lib := newSchema(t, app, "intentjobs_lib_")
	if _, err := app.Exec(`DROP SCHEMA ` + lib); err != nil { // opening makes it
		t.Fatal(err)
	}
	s, err := jobs.OpenPostgres(ctx, dsn, jobs.Schema(lib))
	if err != nil {
		t.Fatalf("open with Schema: %v", err)
	}
	t.Cleanup(func() { s.Close() })

	var tables []string
	rows, err := app.Query(`SELECT table_schema || '.' || table_name FROM information_schema.tables
		WHERE table_name LIKE 'intentjobs%' AND table_schema IN (current_schema(), $1) ORDER BY 1`, lib)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(n, lib+".") {
			t.Errorf("table %s outside the store's schema %s", n, lib)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) != 4 {
		t.Errorf("tables of the library: %v, want 4 in %s", tables, lib)
	}

	m := jobstest.NewManager(t, s, jobs.Options{Logger: discard})
	submitWithApplicationRow(t, m, app, "kept", true)
	checkTogether(t, m, app, "kept", true)
	submitWithApplicationRow(t, m, app, "dropped", false)
	checkTogether(t, m, app, "dropped", false)

	// The same through pgx.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, commit := range []bool{true, false} {
		key := fmt.Sprint("pgx-", commit)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO jobs (id, title) VALUES ($1, 'the application''s')`, key); err != nil {
			t.Fatal(err)
		}
		if _, created, err := m.SubmitPgxTx(ctx, tx, txRequest(key)); err != nil || !created {
			t.Fatalf("SubmitPgxTx = %v, %v", created, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkTogether(t, m, app, key, commit)
	}

	// A store over the same schema, opened again, finds it migrated.
	again, err := jobs.OpenPostgres(ctx, dsn, jobs.Schema(lib), jobs.SkipMigrations())
	if err != nil {
		t.Fatalf("open again with Schema and SkipMigrations: %v", err)
	}
	again.Close()
}

// TestPostgresInItsOwnSchema runs the conformance suite on stores opened
// with Schema over connections whose search_path names another, empty,
// schema: a statement that did not name the store's schema would fail.
func TestPostgresInItsOwnSchema(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store {
		s, _ := newPostgresInSchema(t, "")
		return s
	})
}

// newPostgresInSchema opens a store in a schema of its own, with Schema,
// over a pool whose search_path is a fresh empty schema, and returns it
// with the name of its schema; mode "exec" makes its connections prepare
// no statement.
func newPostgresInSchema(t testing.TB, mode string) (*jobs.PostgresStore, string) {
	t.Helper()
	dsn := testdb.PostgresDSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if mode == "exec" {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(4)
	lib := newSchema(t, db, "intentjobs_own_")
	s, err := jobs.NewPostgresStore(context.Background(), db, jobs.Schema(lib))
	if err != nil {
		t.Fatalf("open with Schema: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, lib
}

// TestPostgresSchemaCompletesInOneStatement: Complete in one statement, as
// connections that prepare no statement run it, names the store's schema
// too: a winner, a loser, and a result dropped by a cancelled job.
func TestPostgresSchemaCompletesInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newPostgresInSchema(t, "exec")
	m := jobstest.NewManager(t, s, jobs.Options{Logger: discard, Hedging: true})
	j := submitOK(t, m, chargeReq("u", "k"))
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MarkRunning(ctx, a.ID, "ref-a"); err != nil {
		t.Fatal(err)
	}
	b, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, b.ID, []byte(`{"by":"b"}`)); err != nil {
		t.Fatalf("winner: %v", err)
	}
	if _, err := m.Complete(ctx, a.ID, []byte(`{"by":"a"}`)); !errors.Is(err, jobs.ErrLostRace) {
		t.Fatalf("loser: %v, want ErrLostRace", err)
	}
	c := submitOK(t, m, chargeReq("u", "cancelled"))
	ca, err := m.StartAttempt(ctx, c.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CancelJob(ctx, c.ID, "user"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(ctx, ca.ID, []byte(`{}`)); !errors.Is(err, jobs.ErrJobClosed) {
		t.Fatalf("after CancelJob: %v, want ErrJobClosed", err)
	}
	checkNoViolations(t, s)
}

// TestPostgresSchemasDoNotWakeEachOther: stores in two schemas of one
// database listen on channels of their own: closing a waited job of one
// wakes its waiter, and sends nothing on the other's channel, which hears
// the other's jobs.
func TestPostgresSchemasDoNotWakeEachOther(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	one, _ := newPostgresInSchema(t, "")
	other, otherSchema := newPostgresInSchema(t, "")
	conn, err := pgx.Connect(ctx, testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{"intentjobs_closed." + otherSchema}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	m := jobstest.NewManager(t, one, jobs.Options{Logger: discard})
	j := submitOK(t, m, chargeReq("u", "waited"))
	wake, stop, err := one.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := m.CancelJob(ctx, j.ID, "done"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the waiter of the closed job was not woken")
	}
	quiet, cancelQuiet := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelQuiet()
	if n, err := conn.WaitForNotification(quiet); err == nil {
		t.Errorf("the other schema's channel heard %q, a job of another schema", n.Payload)
	}

	// The other store's own closes are heard there.
	om := jobstest.NewManager(t, other, jobs.Options{Logger: discard})
	oj := submitOK(t, om, chargeReq("u", "other"))
	owake, ostop, err := other.NotifyClosed(ctx, oj.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer ostop()
	if _, err := om.CancelJob(ctx, oj.ID, "done"); err != nil {
		t.Fatal(err)
	}
	<-owake
	if n, err := conn.WaitForNotification(ctx); err != nil || n.Payload != oj.ID {
		t.Errorf("the other schema's channel: %v, %v; want %s", n, err, oj.ID)
	}
}

// TestSQLiteBesideApplicationTables: in a database file that already has
// the application's own jobs and job_attempts tables, opening a store
// succeeds, the conformance suite passes, and SubmitTx in the
// application's transaction writes the library's job and the
// application's row together, or neither.
func TestSQLiteBesideApplicationTables(t *testing.T) {
	t.Parallel()
	open := func(t testing.TB) *jobs.SQLiteStore {
		path := filepath.Join(t.TempDir(), "app.db")
		db, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(applicationTables); err != nil {
			t.Fatal(err)
		}
		return testdb.NewSQLiteAt(t, path)
	}
	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		jobstest.Run(t, func(t testing.TB) jobs.Store { return open(t) })
	})
	t.Run("SubmitTx", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		m := jobstest.NewManager(t, s, jobs.Options{Logger: discard})
		submitWithApplicationRow(t, m, s.DB(), "kept", true)
		checkTogether(t, m, s.DB(), "kept", true)
		submitWithApplicationRow(t, m, s.DB(), "dropped", false)
		checkTogether(t, m, s.DB(), "dropped", false)
	})
}

// TestPostgresSchemaRejectsBadNames: Schema with an empty name, one longer
// than PostgreSQL's names, or one holding a NUL fails with ErrInvalidInput
// before anything is written.
func TestPostgresSchemaRejectsBadNames(t *testing.T) {
	t.Parallel()
	dsn := testdb.PostgresDSN(t)
	for _, name := range []string{"", "s" + fmt.Sprintf("%063d", 0), "a\x00b"} {
		_, err := jobs.OpenPostgres(context.Background(), dsn, jobs.Schema(name))
		var input *jobs.InputError
		if !errors.As(err, &input) || input.Field != "Schema" {
			t.Errorf("Schema(%q): err = %v; want an InputError for Schema", name, err)
		}
	}
}
