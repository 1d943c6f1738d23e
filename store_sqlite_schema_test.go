package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// TestSQLiteWritesBuildNoTransientTables: SQLite evaluates an IN list of
// three or more values through a transient table built for each statement
// that checks it. The schema's CHECK constraints and partial indexes,
// which every insert and update of intentjobs_jobs and intentjobs_attempts
// evaluates, spell their lists as comparisons, so that none of those writes
// builds one.
func TestSQLiteWritesBuildNoTransientTables(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLite(t).DB()
	for _, w := range []struct{ name, stmt string }{
		{"insert a job", `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
		    VALUES ('j', 'o', 'k', 'k', 'p', '{}', 'f', 'pending', 1, 1, 1) ON CONFLICT (owner, idempotency_key) DO NOTHING`},
		{"start a job", `UPDATE intentjobs_jobs SET state = 'running', version = version + 1, attempt_count = attempt_count + 1 WHERE id = 'j'`},
		{"complete a job", `UPDATE intentjobs_jobs SET state = 'succeeded', result = '{}', completed_by = 'a', version = version + 1,
		    updated_at = 2, closed_at = 2 WHERE id = 'j' AND version = 2 AND completed_by IS NULL AND state = 'running'`},
		{"close a job", `UPDATE intentjobs_jobs SET state = 'failed', reason = 'r', closed_at = 2 WHERE id = 'j'`},
		{"insert an attempt", `INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
		    VALUES ('a', 'j', 1, 'p', 'starting', 1, 0, 1, 1)`},
		{"move an attempt", `UPDATE intentjobs_attempts SET state = 'running', provider_ref = 'r', updated_at = 2 WHERE id = 'a'`},
		{"finish an attempt", `UPDATE intentjobs_attempts SET state = 'lost', reason = 'r', updated_at = 2, finished_at = 2 WHERE id = 'a'`},
		{"claim an attempt", `UPDATE intentjobs_attempts SET claim_token = 't', claimed_until = 3 WHERE id = 'a'`},
	} {
		t.Run(w.name, func(t *testing.T) {
			rows, err := db.Query("EXPLAIN " + w.stmt)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			n, ops := 0, 0
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				ops++
				if op, _ := vals[1].(string); op == "OpenEphemeral" {
					n++
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if ops == 0 {
				t.Fatal("EXPLAIN returned no program")
			}
			if n != 0 {
				t.Errorf("%d transient tables (OpenEphemeral) in %d opcodes", n, ops)
			}
		})
	}
}

// TestSQLiteMigrationKeepsForeignKeys: run by a tool on a connection with
// foreign keys off (SQLite's default) and legacy_alter_table on (then SQLite
// renames a table without updating the references to it), the migrations
// leave intentjobs_attempts referring to intentjobs_jobs, and deleting a
// job still deletes its attempts.
func TestSQLiteMigrationKeepsForeignKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptyDatabase(t, jobs.SQLite)
	db.SetMaxOpenConns(1) // the pragmas below are the connection's
	for _, p := range []string{"PRAGMA foreign_keys = OFF", "PRAGMA legacy_alter_table = ON"} {
		if _, err := db.ExecContext(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := jobs.MigrationList(jobs.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("exec %s: %v", m.Name, err)
		}
	}
	var parent string
	if err := db.QueryRowContext(ctx, `SELECT "table" FROM pragma_foreign_key_list('intentjobs_attempts')`).Scan(&parent); err != nil || parent != "intentjobs_jobs" {
		t.Fatalf("intentjobs_attempts refers to %q (%v), want intentjobs_jobs", parent, err)
	}
	s, err := openSkippingMigrations(ctx, db, jobs.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	m := jobstest.NewManager(t, s, jobs.Options{Logger: discard})
	j := submitOK(t, m, chargeReq("u", "k"))
	runToSuccess(t, m, j)
	if _, err := db.ExecContext(ctx, `PRAGMA foreign_keys = ON`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM intentjobs_jobs WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM intentjobs_attempts WHERE job_id = ?`, j.ID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d attempts left after their job was deleted (%v), want 0", n, err)
	}
}

// TestSQLiteWritesKeepTheLogBounded checks that the writes that return
// their row (MarkRunning, ClaimAttempt, CancelJob) let SQLite checkpoint
// the write-ahead log. SQLite runs its checkpoint after a write when the
// write's statement finishes, not when a statement read for one row is
// reset: a store that read them with QueryRow would never checkpoint on
// them, and a run of them alone would grow the log without bound (about
// 30 MB for the writes below).
func TestSQLiteWritesKeepTheLogBounded(t *testing.T) {
	if !testdb.Long() {
		t.Skipf("a soak of thousands of writes: set %s=1 to run it", testdb.EnvLong)
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	store, err := jobs.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1500
	jobIDs, attemptIDs := make([]string, n), make([]string, n)
	for i := range n {
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: fmt.Sprintf("k%d", i), Kind: "k", Provider: "p", Params: json.RawMessage(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		jobIDs[i], attemptIDs[i] = j.ID, a.ID
	}
	var pageSize int64
	if err := store.DB().QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	limit := 2000 * pageSize // twice the automatic checkpoint's threshold of 1,000 pages
	for _, w := range []struct {
		name  string
		write func(i int) error
	}{
		{"MarkRunning", func(i int) error { _, err := m.MarkRunning(ctx, attemptIDs[i], "ref"); return err }},
		{"ClaimAttempt", func(i int) error {
			a, err := store.Attempt(ctx, attemptIDs[i])
			if err != nil {
				return err
			}
			now := time.Now()
			_, _, err = store.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt, Token: "t", At: now, Until: now.Add(time.Minute)})
			return err
		}},
		{"CancelJob", func(i int) error { _, err := m.CancelJob(ctx, jobIDs[i], "r"); return err }},
	} {
		if _, err := store.DB().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := w.write(i); err != nil {
				t.Fatalf("%s %d: %v", w.name, i, err)
			}
		}
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > limit {
			t.Errorf("after %d of %s alone, the log holds %d MB: never checkpointed", n, w.name, fi.Size()>>20)
		}
	}
}
