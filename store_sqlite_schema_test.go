package jobs_test

import (
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

// TestSQLiteWritesBuildNoTransientTables: SQLite evaluates an IN list of
// three or more values through a transient table built for each statement
// that checks it. The schema's CHECK constraints and partial indexes,
// which every insert and update of jobs and job_attempts evaluates, spell
// their lists as comparisons (migration 0004), so that none of those
// writes builds one.
func TestSQLiteWritesBuildNoTransientTables(t *testing.T) {
	t.Parallel()
	db := testdb.NewSQLite(t).DB()
	for _, w := range []struct{ name, stmt string }{
		{"insert a job", `INSERT INTO jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
		    VALUES ('j', 'o', 'k', 'k', 'p', '{}', 'f', 'pending', 1, 1, 1) ON CONFLICT (owner, idempotency_key) DO NOTHING`},
		{"start a job", `UPDATE jobs SET state = 'running', version = version + 1, attempt_count = attempt_count + 1 WHERE id = 'j'`},
		{"complete a job", `UPDATE jobs SET state = 'succeeded', result = '{}', completed_by = 'a', version = version + 1,
		    updated_at = 2, closed_at = 2 WHERE id = 'j' AND version = 2 AND completed_by IS NULL AND state = 'running'`},
		{"close a job", `UPDATE jobs SET state = 'failed', reason = 'r', closed_at = 2 WHERE id = 'j'`},
		{"insert an attempt", `INSERT INTO job_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
		    VALUES ('a', 'j', 1, 'p', 'starting', 1, 0, 1, 1)`},
		{"move an attempt", `UPDATE job_attempts SET state = 'running', provider_ref = 'r', updated_at = 2 WHERE id = 'a'`},
		{"finish an attempt", `UPDATE job_attempts SET state = 'lost', reason = 'r', updated_at = 2, finished_at = 2 WHERE id = 'a'`},
		{"claim an attempt", `UPDATE job_attempts SET claim_token = 't', claimed_until = 3 WHERE id = 'a'`},
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
