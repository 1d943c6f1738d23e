package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Asia/Tokyo, for a driver that parses times in another zone

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/mysql"
)

func newManager(t testing.TB, s jobs.Store) (*jobs.Manager, *jobstest.Clock) {
	t.Helper()
	clock := jobstest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC))
	return jobstest.NewManager(t, s, jobs.Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)}), clock
}

func charge(owner, key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200}`)}
}

// Keys and owners are compared byte for byte: a case-insensitive
// collation would bind Key-1 and key-1 to one job, and a PAD SPACE one
// (utf8mb4_bin included) 'key' and 'key '.
func TestKeysAreComparedByteForByte(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	m, _ := newManager(t, s)
	ctx := t.Context()
	groups := [][]jobs.SubmitRequest{
		{charge("owner-1", "Key-1"), charge("owner-1", "key-1"), charge("owner-1", "KEY-1")},
		{charge("owner-1", "pad"), charge("owner-1", "pad "), charge("owner-1", "pad  ")},
		{charge("owner-1", "straße"), charge("owner-1", "strasse"), charge("owner-1", "STRASSE")},
		{charge("owner-1", "é"), charge("owner-1", "e\u0301"), charge("owner-1", "e")}, // composed, decomposed, plain
		{charge("Owner-A", "k"), charge("owner-a", "k"), charge("owner-a ", "k")},
	}
	seen := map[string]string{}
	for _, g := range groups {
		for _, r := range g {
			j, created, err := m.Submit(ctx, r)
			if err != nil || !created {
				t.Fatalf("Submit(%q, %q) = %v, %v; want a new job", r.Owner, r.Key, created, err)
			}
			if prev, ok := seen[j.ID]; ok {
				t.Fatalf("%q and %q share job %s", prev, r.Owner+"/"+r.Key, j.ID)
			}
			seen[j.ID] = r.Owner + "/" + r.Key
			got, err := m.GetByKey(ctx, r.Owner, r.Key)
			if err != nil || got.ID != j.ID || got.Key != r.Key || got.Owner != r.Owner {
				t.Fatalf("GetByKey(%q, %q) = %s %q %q, %v; want %s", r.Owner, r.Key, got.ID, got.Owner, got.Key, err, j.ID)
			}
		}
	}
	// And each key still replays its own job.
	for _, g := range groups {
		for _, r := range g {
			j, created, err := m.Submit(ctx, r)
			if err != nil || created || seen[j.ID] != r.Owner+"/"+r.Key {
				t.Fatalf("replay of %q/%q = %s (%s), %v, %v", r.Owner, r.Key, j.ID, seen[j.ID], created, err)
			}
		}
	}
}

// The database itself holds at most one attempt in doubt per job,
// whatever a writer does: the generated column's unique index refuses a
// second, with neither the store's code nor its locks in the way.
func TestDatabaseRefusesTwoAttemptsInDoubt(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	m, _ := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("owner-1", "k"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	const insert = `INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, created_at, updated_at, finished_at)
	    VALUES (?, ?, ?, 'acme', ?, 1, '2026-01-02 03:04:05', '2026-01-02 03:04:05', ?)`
	for i, state := range []string{"starting", "unknown"} {
		_, err := s.DB().ExecContext(ctx, insert, "att_x"+state, j.ID, 10+i, state, nil)
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1062 || !strings.Contains(me.Message, "intentjobs_attempts_one_in_doubt") {
			t.Errorf("a second attempt %s beside %s (starting): %v; want a duplicate on intentjobs_attempts_one_in_doubt", state, a.ID, err)
		}
	}
	// Running and terminal attempts are not in doubt: any number of them.
	for i, state := range []string{"running", "running", "failed", "cancelled"} {
		var finished any
		if state != "running" {
			finished = "2026-01-02 03:04:05"
		}
		if _, err := s.DB().ExecContext(ctx, insert, fmt.Sprintf("att_y%d", i), j.ID, 20+i, state, finished); err != nil {
			t.Errorf("an attempt %s beside one starting: %v", state, err)
		}
	}
	// Once the first is resolved, another may be in doubt.
	if _, err := m.Fail(ctx, a.ID, "declined"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, insert, "att_z", j.ID, 30, "unknown", nil); err != nil {
		t.Errorf("an attempt unknown once the other failed: %v", err)
	}
}

// The schema's CHECK constraints hold on both servers.
func TestDatabaseRefusesImpossibleRows(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	const job = `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
	    completed_by, result, created_at, updated_at, closed_at)
	    VALUES (?, 'o', ?, 'k', 'p', '{}', 'f', ?, 1, ?, ?, '2026-01-02', '2026-01-02', ?)`
	for _, tc := range []struct {
		name        string
		state       string
		completedBy any
		result      any
		closedAt    any
	}{
		{"unknown state", "done", nil, nil, nil},
		{"succeeded without a winner", "succeeded", nil, `{}`, "2026-01-02"},
		{"winner while running", "running", "att_1", `{}`, nil},
		{"failed without closed_at", "failed", nil, nil, nil},
		{"pending with closed_at", "pending", nil, nil, "2026-01-02"},
	} {
		_, err := s.DB().ExecContext(ctx, job, "job_"+tc.name, tc.name, tc.state, tc.completedBy, tc.result, tc.closedAt)
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || (me.Number != 4025 && me.Number != 3819) {
			t.Errorf("%s: %v; want a CHECK violation", tc.name, err)
		}
	}
}

// Open makes every session strict, whatever the server's or the DSN's
// sql_mode; New refuses a session that is not strict, writing nothing.
// A session with sql_mode=” is what a server configured without strict
// mode gives every connection.
func TestStrictMode(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"sql_mode": "'NO_ENGINE_SUBSTITUTION'"}
	lax := cfg.FormatDSN()

	t.Run("New refuses", func(t *testing.T) {
		db, err := sql.Open("mysql", lax)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		_, err = mysql.New(t.Context(), db)
		if !errors.Is(err, mysql.ErrNotStrict) || !strings.Contains(err.Error(), "NO_ENGINE_SUBSTITUTION") {
			t.Fatalf("New over a session without strict mode: %v; want ErrNotStrict naming the mode", err)
		}
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the refused New left %d tables (%v)", n, err)
		}
	})

	t.Run("Open sets it", func(t *testing.T) {
		s := openStoreAt(t, lax)
		var mode string
		if err := s.DB().QueryRowContext(t.Context(), `SELECT @@SESSION.sql_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(mode, "STRICT_ALL_TABLES") || !strings.Contains(mode, "NO_ENGINE_SUBSTITUTION") {
			t.Fatalf("a session of Open has sql_mode %q; want the DSN's with STRICT_ALL_TABLES", mode)
		}
		// A value too long for its column is refused, not cut.
		_, err := s.DB().ExecContext(t.Context(), `INSERT INTO intentjobs_verifications (id, provider, kind, contract_version, passed, verified_at)
		    VALUES (?, 'p', 'k', 'v', TRUE, '2026-01-02')`, strings.Repeat("x", 300))
		var me *gomysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1406 {
			t.Fatalf("a 300-byte ID into VARBINARY(255): %v; want error 1406 (data too long)", err)
		}
		m, _ := newManager(t, s)
		if _, _, err := m.Submit(t.Context(), charge("o", "k")); err != nil {
			t.Fatal(err)
		}
	})
}

// Times are stored in UTC to the microsecond, whatever the session's time
// zone and the driver's loc, and read back as the Manager wrote them.
func TestTimesAreUTCMicroseconds(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Another process's handle, in another zone, with parseTime off.
	cfg.Params = map[string]string{"time_zone": "'+05:30'"}
	if cfg.Loc, err = time.LoadLocation("Asia/Tokyo"); err != nil {
		t.Fatal(err)
	}
	otherDSN := cfg.FormatDSN()
	cfg.ParseTime = true
	withParse := cfg.FormatDSN()

	s := openStoreAt(t, dsn)
	m, clock := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	if !j.CreatedAt.Equal(want) || j.CreatedAt.Location() != time.UTC {
		t.Fatalf("CreatedAt = %v; want %v", j.CreatedAt, want)
	}
	var text string
	if err := s.DB().QueryRowContext(ctx, `SELECT CAST(created_at AS CHAR) FROM intentjobs_jobs WHERE id = ?`, j.ID).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if text != "2026-01-02 03:04:05.123456" {
		t.Fatalf("stored created_at = %q; want 2026-01-02 03:04:05.123456", text)
	}
	clock.Advance(time.Hour)
	for _, d := range []string{otherDSN, withParse} {
		db, err := sql.Open("mysql", d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		other, err := mysql.New(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		got, err := other.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(want) || got.CreatedAt.Location() != time.UTC {
			t.Errorf("through %s: CreatedAt = %v; want %v", d, got.CreatedAt, want)
		}
		a, err := jobstest.NewManager(t, other, jobs.Options{Clock: clock}).StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		read, err := s.Attempt(ctx, a.ID)
		if err != nil || !read.CreatedAt.Equal(want.Add(time.Hour)) || !a.CreatedAt.Equal(read.CreatedAt) {
			t.Errorf("through %s: attempt created at %v, read back as %v (%v); want %v", d, a.CreatedAt, read.CreatedAt, err, want.Add(time.Hour))
		}
		if _, err := s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: a.ID, From: []jobs.AttemptState{jobs.AttemptStarting},
			To: jobs.AttemptFailed, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// The migration files: goose's annotations, golang-migrate's names, and a
// database migrated by running each file whole, twice, opens with
// SkipMigrations; an empty one does not.
func TestMigrations(t *testing.T) {
	t.Parallel()
	ms := mysql.MigrationList()
	if len(ms) != 2 || mysql.SchemaVersion() != 2 {
		t.Fatalf("%d migrations, schema version %d; want 2", len(ms), mysql.SchemaVersion())
	}
	gm, err := mysql.MigrationsFor(jobs.GolangMigrate)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Version != i+1 || !strings.HasPrefix(m.SQL, "-- +goose Up\n") {
			t.Errorf("migration %d: version %d, %s does not start with goose's annotation", i, m.Version, m.Name)
		}
		b, err := fs.ReadFile(mysql.Migrations(), m.Name)
		if err != nil || string(b) != m.SQL {
			t.Errorf("Migrations()/%s: %v", m.Name, err)
		}
		up, err := fs.ReadFile(gm, strings.TrimSuffix(m.Name, ".sql")+".up.sql")
		if err != nil || string(up) != m.SQL {
			t.Errorf("golang-migrate's %s: %v", m.Name, err)
		}
	}
	if _, err := mysql.MigrationsFor(jobs.MigrationLayout(9)); !errors.Is(err, jobs.ErrInvalidInput) {
		t.Errorf("an unknown layout: %v; want ErrInvalidInput", err)
	}

	dsn := newDatabase(t, serverDSN(t))
	ctx := t.Context()
	_, err = mysql.Open(ctx, dsn, mysql.SkipMigrations())
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageSchema {
		t.Fatalf("SkipMigrations on an empty database: %v; want a StorageError of kind schema", err)
	}
	// As golang-migrate with multiStatements=true does: each file sent
	// whole.
	db := multiStatements(t, dsn)
	for _, m := range ms {
		for range 2 { // twice: a file run again changes nothing
			if _, err := db.ExecContext(ctx, m.SQL); err != nil {
				t.Fatalf("running %s: %v", m.Name, err)
			}
		}
	}
	s := openStoreAt(t, dsn, mysql.SkipMigrations())
	applied, err := s.AppliedMigrations(ctx)
	if err != nil || len(applied) != 2 || applied[0].Name != "0001_init.sql" || applied[1].Name != "0002_attempt_lookups.sql" {
		t.Fatalf("AppliedMigrations = %+v, %v", applied, err)
	}
	if v, err := s.DatabaseSchemaVersion(ctx); err != nil || v != mysql.SchemaVersion() {
		t.Fatalf("DatabaseSchemaVersion = %d, %v; want %d", v, err, mysql.SchemaVersion())
	}
	if got := indexColumns(t, db, "intentjobs_attempts_provider_ref_idx"); got != "provider_ref(255)" {
		t.Errorf("intentjobs_attempts_provider_ref_idx is on %s; want provider_ref(255)", got)
	}
	// A database whose schema is newer than the package is refused.
	if _, err := db.ExecContext(ctx, `INSERT INTO intentjobs_schema_migrations VALUES (99, '0099_future.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	if _, err := mysql.Open(ctx, dsn); !errors.As(err, &se) || se.Kind != jobs.StorageSchema || !strings.Contains(se.Message, "newer") {
		t.Fatalf("Open on a newer schema: %v; want a StorageError of kind schema", err)
	}
}

// multiStatements opens a handle on dsn that sends a script whole, as
// golang-migrate's does.
func multiStatements(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// indexColumns describes the columns of an index of intentjobs_attempts,
// with their prefix lengths: "provider_ref(255)".
func indexColumns(t testing.TB, db *sql.DB, index string) string {
	t.Helper()
	rows, err := db.Query(`SELECT column_name, sub_part FROM information_schema.statistics
	    WHERE table_schema = DATABASE() AND table_name = 'intentjobs_attempts' AND index_name = ? ORDER BY seq_in_index`, index)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var name string
		var sub sql.NullInt64
		if err := rows.Scan(&name, &sub); err != nil {
			t.Fatal(err)
		}
		if sub.Valid {
			name += fmt.Sprintf("(%d)", sub.Int64)
		}
		cols = append(cols, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(cols, ", ")
}

// Several openers of one empty database at once: one schema, one version
// row, and every store works.
func TestConcurrentOpeners(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	const n = 6
	stores := make([]*mysql.Store, n)
	errs := make([]error, n)
	release(n, func(i int) {
		stores[i], errs[i] = mysql.Open(context.Background(), dsn)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	applied, err := stores[0].AppliedMigrations(t.Context())
	if err != nil || len(applied) != mysql.SchemaVersion() {
		t.Fatalf("AppliedMigrations = %+v, %v", applied, err)
	}
}
