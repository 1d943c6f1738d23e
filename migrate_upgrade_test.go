package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// The schema of the library's development versions, before its first
// release: their migrations are kept in testdata/dev-migrations, and their
// last versions are the ones a store upgrades.
var developmentLatest = map[jobs.Dialect]int{jobs.Postgres: 6, jobs.SQLite: 5}

// developmentMigrations returns the SQL of the development migrations of
// dialect, in order.
func developmentMigrations(t testing.TB, dialect jobs.Dialect) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "dev-migrations", string(dialect), "*.sql"))
	if err != nil || len(paths) != developmentLatest[dialect] {
		t.Fatalf("development migrations of %s: %d files (%v), want %d", dialect, len(paths), err, developmentLatest[dialect])
	}
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// developmentDatabase is a database that a development version of the
// library left: the place a store opens (a SQLite file's path, or the DSN
// of a PostgreSQL schema) and a handle on it that goes around the library.
type developmentDatabase struct {
	dialect jobs.Dialect
	dsn     string
	db      *sql.DB
}

// newDevelopmentDatabase builds a fresh database of dialect at development
// schema version upTo, as the development versions' migrations built it,
// and, at the last of them, fills it with jobs, attempts and verifications
// of every kind.
func newDevelopmentDatabase(t *testing.T, dialect jobs.Dialect, upTo int) developmentDatabase {
	t.Helper()
	d := developmentDatabase{dialect: dialect}
	driver := "sqlite3"
	if dialect == jobs.Postgres {
		driver, d.dsn = "pgx", testdb.PostgresDSN(t)
	} else {
		d.dsn = filepath.Join(t.TempDir(), "dev.db")
	}
	db, err := sql.Open(driver, d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d.db = db
	for i, m := range developmentMigrations(t, dialect)[:upTo] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("development migration %d: %v", i+1, err)
		}
	}
	if upTo == developmentLatest[dialect] {
		d.fill(t)
	}
	return d
}

// fill writes rows of every kind into the development schema: a job
// completed by one attempt and lost by another, a job whose attempt is
// unknown under an expired claim, a pending job, a cancelled job whose
// attempt's result was dropped, two verifications, and on PostgreSQL a job
// marked watched and a waiter's row.
func (d developmentDatabase) fill(t *testing.T) {
	t.Helper()
	at := func(s string) any {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		if d.dialect == jobs.SQLite {
			return tm.UnixMicro()
		}
		return tm
	}
	fp := func(params string) string { return jobs.Fingerprint("charge", "stripe", json.RawMessage(params)) }
	t1, t2, t3 := at("2025-06-01T10:00:00Z"), at("2025-06-01T11:00:00Z"), at("2025-06-01T12:00:00Z")
	past := at("2025-06-01T11:30:00Z")
	stmts := []struct {
		q    string
		args []any
	}{
		{`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count,
		      result, completed_by, created_at, updated_at, closed_at)
		    VALUES ('job_done', 'u', 'k-done', 'charge', 'stripe', '{"amount":1200}', $1, 'succeeded', 2, 2,
		      '{"ok":true}', 'att_done', $2, $3, $3)`, []any{fp(`{"amount":1200}`), t1, t2}},
		{`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, provider_ref, created_at, updated_at, finished_at)
		    VALUES ('att_done', 'job_done', 1, 'stripe', 'succeeded', 1, 'ch_1', $1, $2, $2)`, []any{t1, t2}},
		{`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, reason, created_at, updated_at, finished_at)
		    VALUES ('att_lost', 'job_done', 2, 'adyen', 'lost', 1, $1, $2, $3, $4, $4)`,
			[]any{true, jobs.DroppedReason(jobs.Job{CompletedBy: "att_done"}), t1, t2}},
		{`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, created_at, updated_at)
		    VALUES ('job_doubt', 'u', 'k-doubt', 'charge', 'stripe', '{"amount":5}', $1, 'running', 1, 1, $2, $2)`,
			[]any{fp(`{"amount":5}`), t2}},
		{`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, reason, created_at, updated_at,
		      claim_token, claimed_until)
		    VALUES ('att_doubt', 'job_doubt', 1, 'stripe', 'unknown', 1, 'timeout', $1, $1, 'clm_old', $2)`, []any{t2, past}},
		{`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
		    VALUES ('job_new', 'u', 'k-new', 'charge', 'stripe', '{}', $1, 'pending', 1, $2, $2)`, []any{fp(`{}`), t3}},
		{`INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count,
		      reason, created_at, updated_at, closed_at)
		    VALUES ('job_cancelled', 'v', 'k-cancelled', 'charge', 'stripe', '{"amount":7}', $1, 'cancelled', 2, 1,
		      'user', $2, $3, $3)`, []any{fp(`{"amount":7}`), t1, t3}},
		{`INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, reason, created_at, updated_at, finished_at)
		    VALUES ('att_dropped', 'job_cancelled', 1, 'stripe', 'cancelled', 1, $1, $2, $3, $3)`,
			[]any{jobs.ReasonDroppedJobCancelled, t1, t3}},
		{`INSERT INTO job_verifications (id, provider, kind, contract_version, passed, reason, verified_at, expires_at)
		    VALUES ('ver_ok', 'stripe', 'charge', 'v1', $1, '', $2, $3)`, []any{true, t1, at("2035-01-01T00:00:00Z")}},
		{`INSERT INTO job_verifications (id, provider, kind, contract_version, passed, reason, verified_at)
		    VALUES ('ver_bad', 'adyen', 'charge', 'v1', $1, 'mismatch', $2)`, []any{false, t2}},
	}
	if d.dialect == jobs.Postgres {
		stmts = append(stmts,
			struct {
				q    string
				args []any
			}{`UPDATE jobs SET watched = true WHERE id = 'job_done'`, nil},
			struct {
				q    string
				args []any
			}{`INSERT INTO jobs_waiters (job_id, token) VALUES ('job_doubt', 'tok')`, nil})
	}
	for _, st := range stmts {
		if _, err := d.db.Exec(d.rebind(st.q), st.args...); err != nil {
			t.Fatalf("%v\n%s", err, st.q)
		}
	}
}

// rebind writes a statement's $n placeholders as SQLite's ?n.
func (d developmentDatabase) rebind(q string) string {
	if d.dialect == jobs.SQLite {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

// open opens a store on the database, with opts.
func (d developmentDatabase) open(opts ...jobs.StoreOption) (jobs.SQLStore, error) {
	ctx := context.Background()
	if d.dialect == jobs.Postgres {
		s, err := jobs.OpenPostgres(ctx, d.dsn, postgresOptions(opts)...)
		if err == nil {
			s.DB().SetMaxOpenConns(4)
		}
		return s, err
	}
	return jobs.OpenSQLite(ctx, d.dsn, sqliteOptions(opts)...)
}

// rows returns every row of the tables named, as text, in the order of
// their IDs. Each table is read with the development schema's column
// names, which the upgrade keeps.
func (d developmentDatabase) rows(t *testing.T, jobsTable, attemptsTable, verificationsTable string) []string {
	t.Helper()
	jobCols := "id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, " +
		"result, completed_by, reason, created_at, updated_at, closed_at"
	if d.dialect == jobs.Postgres {
		jobCols += ", watched"
	}
	var out []string
	for _, q := range []string{
		`SELECT ` + jobCols + ` FROM ` + jobsTable + ` ORDER BY id`,
		`SELECT id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason, created_at, updated_at,
		   finished_at, claim_token, claimed_until FROM ` + attemptsTable + ` ORDER BY id`,
		`SELECT id, provider, kind, contract_version, passed, reason, verified_at, expires_at FROM ` + verificationsTable + ` ORDER BY id`,
	} {
		out = append(out, queryText(t, d.db, q)...)
	}
	return out
}

// queryText runs query and returns each row as one line of text.
func queryText(t testing.TB, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			if raw, ok := v.([]byte); ok {
				v = string(raw)
			}
			if tm, ok := v.(time.Time); ok {
				v = tm.UTC().Format(time.RFC3339Nano)
			}
			fmt.Fprintf(&b, "%s=%v ", cols[i], v)
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// describeSchema lists, as text, everything the library's schema defines
// in db: the tables, their columns, constraints, indexes and storage
// parameters, and on PostgreSQL the trigger and its function, in the
// schema of db's search_path. Two databases with the same description
// have the same schema.
func describeSchema(t testing.TB, db *sql.DB, dialect jobs.Dialect) []string {
	t.Helper()
	if dialect == jobs.SQLite {
		return queryText(t, db, `SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master ORDER BY type, name`)
	}
	var schema string
	if err := db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return describePostgresSchema(t, db, schema)
}

// describePostgresSchema is describeSchema for the PostgreSQL schema
// named schema, whose name reads SCHEMA in the description.
func describePostgresSchema(t testing.TB, db *sql.DB, schema string) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT c.relname, c.relkind, c.reloptions FROM pg_class c
		  WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) ORDER BY c.relname`,
		`SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
		        pg_get_expr(d.adbin, d.adrelid)
		   FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		   LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		  WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		  ORDER BY c.relname, a.attnum`,
		`SELECT c.relname, con.conname, pg_get_constraintdef(con.oid) FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
		  WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) ORDER BY c.relname, con.conname`,
		`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`,
		`SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		  WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) AND NOT t.tgisinternal ORDER BY t.tgname`,
		`SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p
		  WHERE p.pronamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) ORDER BY p.proname`,
	} {
		for _, line := range queryText(t, db, q, schema) {
			out = append(out, strings.ReplaceAll(line, schema, "SCHEMA"))
		}
	}
	return out
}

// TestUpgradeFromDevelopmentSchema opens a database that the last
// development version of the library left, with rows of every kind in it:
// opening upgrades it in place to the schema a new database gets, every row
// survives, the development tables are gone, and the store works on it.
func TestUpgradeFromDevelopmentSchema(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dev := newDevelopmentDatabase(t, dialect, developmentLatest[dialect])
			before := dev.rows(t, "jobs", "job_attempts", "job_verifications")
			if len(before) != 4+4+2 {
				t.Fatalf("%d rows written, want 10:\n%s", len(before), strings.Join(before, "\n"))
			}

			s, err := dev.open()
			if err != nil {
				t.Fatalf("open the development database: %v", err)
			}
			t.Cleanup(func() { s.Close() })

			after := dev.rows(t, "intentjobs_jobs", "intentjobs_attempts", "intentjobs_verifications")
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("rows after the upgrade (-before +after):\n%s", diff)
			}
			applied, err := s.AppliedMigrations(ctx)
			ms, _ := jobs.MigrationList(dialect)
			if err != nil || len(applied) != len(ms) || applied[0].Version != 1 || applied[0].Name != "0001_init.sql" {
				t.Errorf("applied migrations = %+v, %v; want 0001_init.sql and the %d after it", applied, err, len(ms)-1)
			}
			var fresh jobs.SQLStore = testdb.NewSQLite(t)
			if dialect == jobs.Postgres {
				fresh = testdb.NewPostgres(t)
			}
			if diff := cmp.Diff(describeSchema(t, fresh.DB(), dialect), describeSchema(t, dev.db, dialect)); diff != "" {
				t.Errorf("schema after the upgrade differs from a new database's (-new +upgraded):\n%s", diff)
			}

			checkUpgradedStoreWorks(t, s)
		})
	}
}

// checkUpgradedStoreWorks runs the library on the rows of a development
// database after its upgrade.
func checkUpgradedStoreWorks(t *testing.T, s jobs.SQLStore) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	m := jobstest.NewManager(t, s, jobs.Options{Clock: jobstest.NewClock(now), Logger: discard})

	done, err := m.Get(ctx, "job_done")
	if err != nil || done.State != jobs.JobSucceeded || done.CompletedBy != "att_done" || string(done.Result) != `{"ok":true}` {
		t.Errorf("job_done = %+v, %v", done, err)
	}
	// A replay still finds its job by key, whatever the whitespace.
	if j, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k-done", Kind: "charge", Provider: "stripe",
		Params: json.RawMessage(`{ "amount": 1200 }`)}); err != nil || created || j.ID != "job_done" {
		t.Errorf("replay of k-done = %s, %v, %v; want job_done", j.ID, created, err)
	}
	// The dropped result is still recorded as such.
	atts, err := m.Attempts(ctx, "job_cancelled")
	if err != nil || len(atts) != 1 || !atts[0].ResultDropped() {
		t.Errorf("attempts of job_cancelled = %+v, %v; want one whose result was dropped", atts, err)
	}
	// The unknown attempt still blocks; its expired claim can be taken
	// over, and it can be resolved.
	if _, err := m.StartAttempt(ctx, "job_doubt", ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
		t.Errorf("attempt past the unknown one: err = %v, want ErrAttemptInFlight", err)
	}
	stale, err := s.StaleAttempts(ctx, jobs.StaleQuery{UnknownBefore: now, OpenBefore: now, UnclaimedAt: now})
	if err != nil || len(stale) != 1 || stale[0].ID != "att_doubt" {
		t.Fatalf("stale attempts = %+v, %v; want att_doubt", stale, err)
	}
	a := stale[0]
	if _, ok, err := s.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
		Token: "clm_new", At: now, Until: now.Add(time.Minute)}); err != nil || !ok {
		t.Errorf("claim att_doubt = %v, %v; want claimed", ok, err)
	}
	if _, err := m.Complete(ctx, "att_doubt", json.RawMessage(`{"late":true}`)); err != nil {
		t.Errorf("complete the unknown attempt: %v", err)
	}
	// The pending job takes attempts, and verifications are read.
	runToSuccess(t, m, jobs.Job{ID: "job_new"})
	if vs, err := m.Verifications(ctx, jobs.VerificationFilter{Kind: "charge"}); err != nil || len(vs) != 2 {
		t.Errorf("verifications = %+v, %v; want 2", vs, err)
	}
	// A waiter is woken when its job closes (PostgreSQL: by the trigger,
	// made again on the new table).
	j := submitOK(t, m, chargeReq("w", "k-wait"))
	if n, ok := s.(jobs.CloseNotifier); ok {
		wake, stop, err := n.NotifyClosed(ctx, j.ID)
		if err != nil {
			t.Fatalf("NotifyClosed: %v", err)
		}
		defer stop()
		if _, err := m.CancelJob(ctx, j.ID, "done waiting"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Error("the waiter was not woken when its job closed")
		}
	}
	checkNoViolations(t, s)
}

// TestUpgradeFromEarlierDevelopmentSchemaRefused opens a database that a
// development version of the library left at an earlier schema than its
// last: the open is refused with a schema error that says what to do, and
// nothing is changed.
func TestUpgradeFromEarlierDevelopmentSchemaRefused(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dev := newDevelopmentDatabase(t, dialect, developmentLatest[dialect]-1)
			before := describeSchema(t, dev.db, dialect)
			s, err := dev.open()
			if err == nil {
				s.Close()
				t.Fatal("opened a development database at an earlier schema")
			}
			var se *jobs.StorageError
			if !errors.As(err, &se) || se.Kind != jobs.StorageSchema {
				t.Fatalf("err = %v; want a StorageError of kind schema", err)
			}
			for _, want := range []string{"development version", fmt.Sprint(developmentLatest[dialect] - 1), "open it once"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if diff := cmp.Diff(before, describeSchema(t, dev.db, dialect)); diff != "" {
				t.Errorf("schema changed by a refused open (-before +after):\n%s", diff)
			}
		})
	}
}

// TestSkipMigrationsOnDevelopmentSchemaSaysHowToUpgrade: SkipMigrations on
// a database of the development schema refuses it, says how to upgrade
// it, and changes nothing.
func TestSkipMigrationsOnDevelopmentSchemaSaysHowToUpgrade(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			dev := newDevelopmentDatabase(t, dialect, developmentLatest[dialect])
			before := describeSchema(t, dev.db, dialect)
			s, err := dev.open(jobs.SkipMigrations())
			if err == nil {
				s.Close()
				t.Fatal("opened a development database with SkipMigrations")
			}
			var se *jobs.StorageError
			if !errors.As(err, &se) || se.Kind != jobs.StorageSchema {
				t.Fatalf("err = %v; want a StorageError of kind schema", err)
			}
			for _, want := range []string{"development version", "without SkipMigrations", "jobsctl migrate"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if diff := cmp.Diff(before, describeSchema(t, dev.db, dialect)); diff != "" {
				t.Errorf("schema changed by a refused open (-before +after):\n%s", diff)
			}
		})
	}
}

// TestUpgradeFromDevelopmentSchemaInSchema: a store opened with Schema
// upgrades the development database in that schema, over connections whose
// search_path names another.
func TestUpgradeFromDevelopmentSchemaInSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := newDevelopmentDatabase(t, jobs.Postgres, developmentLatest[jobs.Postgres])
	var schema string
	if err := dev.db.QueryRow(`SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	before := dev.rows(t, "jobs", "job_attempts", "job_verifications")
	s, err := jobs.OpenPostgres(ctx, testdb.PostgresDSN(t), jobs.Schema(schema))
	if err != nil {
		t.Fatalf("open the development database with Schema: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if diff := cmp.Diff(before, dev.rows(t, "intentjobs_jobs", "intentjobs_attempts", "intentjobs_verifications")); diff != "" {
		t.Errorf("rows after the upgrade (-before +after):\n%s", diff)
	}
	fresh := testdb.NewPostgres(t)
	if diff := cmp.Diff(describeSchema(t, fresh.DB(), jobs.Postgres), describePostgresSchema(t, dev.db, schema)); diff != "" {
		t.Errorf("schema after the upgrade differs from a new database's (-new +upgraded):\n%s", diff)
	}
	checkUpgradedStoreWorks(t, s)
}
