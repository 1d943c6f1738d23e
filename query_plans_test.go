package jobs_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// planCase is one question of operators' tools, and the index its plan
// must use.
type planCase struct {
	name  string
	query string
	args  []any
	index string // "" when the plan may read the table (a count)
}

// sqliteIndex names the indexes that SQLite makes for primary keys and
// UNIQUE constraints.
var sqliteIndex = map[string]string{
	"intentjobs_jobs_pkey":                 "sqlite_autoindex_intentjobs_jobs_1",
	"intentjobs_jobs_owner_key_unique":     "sqlite_autoindex_intentjobs_jobs_2",
	"intentjobs_attempts_pkey":             "sqlite_autoindex_intentjobs_attempts_1",
	"intentjobs_attempts_provider_ref_idx": "intentjobs_attempts_provider_ref_idx",
	"intentjobs_attempts_one_in_doubt":     "intentjobs_attempts_one_in_doubt",
}

// planCases are the questions the console and jobsctl ask, on dialect d.
func planCases(d jobs.Dialect, jobID, attemptID string, now time.Time) []planCase {
	ph := func(n int) string {
		if d == jobs.Postgres {
			return fmt.Sprintf("$%d", n)
		}
		return fmt.Sprintf("?%d", n)
	}
	c := func(name, index string, q string, args []any) planCase { return planCase{name, q, args, index} }
	list := func(name, index string, q jobs.JobQuery) planCase {
		s, args := jobs.ListJobsSQL(d, q)
		return c(name, index, s, args)
	}
	attempts := func(name, index string, q jobs.AttemptQuery) planCase {
		s, args := jobs.ListAttemptsSQL(d, q)
		return c(name, index, s, args)
	}
	count, countArgs := jobs.CountJobsSQL(d, jobs.JobQuery{States: []jobs.JobState{jobs.JobFailed}})
	return []planCase{
		c("job by ID", "intentjobs_jobs_pkey", "SELECT * FROM intentjobs_jobs WHERE id = "+ph(1), []any{jobID}),
		c("job by owner and key", "intentjobs_jobs_owner_key_unique",
			"SELECT * FROM intentjobs_jobs WHERE owner = "+ph(1)+" AND idempotency_key = "+ph(2), []any{"owner-7", "key-77"}),
		c("attempt by ID", "intentjobs_attempts_pkey", "SELECT * FROM intentjobs_attempts WHERE id = "+ph(1), []any{attemptID}),
		attempts("attempt by provider reference", "intentjobs_attempts_provider_ref_idx", jobs.AttemptQuery{ProviderRef: "ref-77", Newest: true, Limit: 50}),
		list("newest jobs, first page", "intentjobs_jobs_pkey", jobs.JobQuery{Newest: true, Limit: 51}),
		list("newest jobs, a page deep in the list", "intentjobs_jobs_pkey", jobs.JobQuery{Newest: true, After: jobID, Limit: 51}),
		list("failed jobs of a kind and provider, a page", "intentjobs_jobs_pkey",
			jobs.JobQuery{States: []jobs.JobState{jobs.JobFailed}, Kind: "charge", Provider: "stripe", Newest: true, After: jobID, Limit: 51}),
		list("jobs created in the last hour", "intentjobs_jobs_pkey", jobs.JobQuery{CreatedAfter: now.Add(-time.Hour), Newest: true, Limit: 51}),
		list("jobs created over an hour ago, newest first", "intentjobs_jobs_pkey", jobs.JobQuery{CreatedBefore: now.Add(-time.Hour), Newest: true, Limit: 51}),
		attempts("attempts in doubt", "intentjobs_attempts_one_in_doubt",
			jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}, Limit: 1000}),
		c("count of failed jobs", "", count, countArgs),
	}
}

// The questions of operators' tools use the indexes: finding one intent
// reads one index entry, a page of a list walks the primary key from the
// page's bound and stops once the page is full, and the queue of attempts
// in doubt reads the partial index of attempts in doubt. Run with -v to
// see the plans (docs/console.md shows them); JOBS_TEST_LONG=1 fills the
// tables with a million jobs first, else with 20000.
func TestQueryPlansOfOperatorsTools(t *testing.T) {
	t.Parallel()
	n := testdb.Size(1_000_000, 20_000)
	for _, d := range []jobs.Dialect{jobs.Postgres, jobs.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			var db *sql.DB
			if d == jobs.Postgres {
				db = testdb.NewPostgres(t).DB()
			} else {
				db = testdb.NewSQLite(t).DB()
			}
			now := time.Now().UTC()
			jobID, attemptID := fill(t, db, d, n, now)
			for _, pc := range planCases(d, jobID, attemptID, now) {
				plan := explain(t, db, d, pc.query, pc.args)
				took := timeQuery(t, db, pc.query, pc.args)
				t.Logf("%s (ran in %v over %d jobs):\n  %s\n%s", pc.name, took, n, pc.query, plan)
				if pc.index == "" {
					continue
				}
				if d == jobs.SQLite {
					pc.index = sqliteIndex[pc.index]
				}
				if !strings.Contains(plan, pc.index) {
					t.Errorf("%s: the plan does not use %s:\n%s", pc.name, pc.index, plan)
				}
				if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "SCAN intentjobs_") && !strings.Contains(plan, "USING") {
					t.Errorf("%s: the plan reads the whole table:\n%s", pc.name, plan)
				}
				if d == jobs.Postgres {
					// The plan PostgreSQL may keep for a prepared statement
					// after a few runs, made without the arguments' values.
					generic := genericPlan(t, db, pc.query, pc.args)
					t.Logf("%s, generic plan:\n%s", pc.name, generic)
					if !strings.Contains(generic, pc.index) || strings.Contains(generic, "Seq Scan") {
						t.Errorf("%s: the generic plan does not use %s:\n%s", pc.name, pc.index, generic)
					}
				}
			}
		})
	}
}

// fill writes n jobs, each with one attempt, created a second apart up
// to now, as a service would have: a tenth failed, one in a thousand in
// doubt, the rest succeeded. It returns the IDs of the job and attempt in
// the middle.
func fill(t *testing.T, db *sql.DB, d jobs.Dialect, n int, now time.Time) (jobID, attemptID string) {
	t.Helper()
	const batch = 2000 // rows per INSERT: 20000 arguments, within both dialects' limits
	ph := func(k int) string {
		if d == jobs.Postgres {
			return fmt.Sprintf("$%d", k)
		}
		return fmt.Sprintf("?%d", k)
	}
	at := func(tm time.Time) any {
		if d == jobs.SQLite {
			return tm.UnixMicro()
		}
		return tm
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for start := 1; start <= n; start += batch {
		var jobRows, attRows []string
		var jobArgs, attArgs []any
		for i := start; i < start+batch && i <= n; i++ {
			created := now.Add(-time.Duration(n-i) * time.Second)
			jid, aid := jobs.IDAt("job_", created), jobs.IDAt("att_", created)
			if i == n/2 {
				jobID, attemptID = jid, aid
			}
			kind, provider := "charge", "adyen"
			if i%3 == 0 {
				kind = "refund"
			}
			if i%2 == 0 {
				provider = "stripe"
			}
			jobState, attState := "succeeded", "succeeded"
			var result, winner, closed, finished any = "{}", aid, at(created), at(created)
			switch {
			case i%10 == 0:
				jobState, attState, result, winner = "failed", "failed", nil, nil
			case i%1000 == 1:
				jobState, attState, result, winner, closed, finished = "running", "unknown", nil, nil, nil, nil
			}
			k := len(jobArgs)
			jobRows = append(jobRows, fmt.Sprintf("(%s, %s, %s, %s, %s, '{}', 'fp', %s, 2, 1, %s, %s, %s, %s, %s)",
				ph(k+1), ph(k+2), ph(k+3), ph(k+4), ph(k+5), ph(k+6), ph(k+7), ph(k+8), ph(k+9), ph(k+9), ph(k+10)))
			jobArgs = append(jobArgs, jid, fmt.Sprint("owner-", i%1000), fmt.Sprint("key-", i), kind, provider, jobState,
				result, winner, at(created), closed)
			k = len(attArgs)
			attRows = append(attRows, fmt.Sprintf("(%s, %s, 1, %s, %s, 1, %s, %s, %s, %s)",
				ph(k+1), ph(k+2), ph(k+3), ph(k+4), ph(k+5), ph(k+6), ph(k+6), ph(k+7)))
			attArgs = append(attArgs, aid, jid, provider, attState, fmt.Sprint("ref-", i), at(created), finished)
		}
		if _, err := tx.Exec(`INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state,
		    version, attempt_count, result, completed_by, created_at, updated_at, closed_at) VALUES `+strings.Join(jobRows, ", "), jobArgs...); err != nil {
			t.Fatalf("fill jobs: %v", err)
		}
		if _, err := tx.Exec(`INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, provider_ref,
		    created_at, updated_at, finished_at) VALUES `+strings.Join(attRows, ", "), attArgs...); err != nil {
			t.Fatalf("fill attempts: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("ANALYZE"); err != nil {
		t.Fatal(err)
	}
	return jobID, attemptID
}

// timeQuery runs query with args, reads every row, and says how long that
// took: for the log, never asserted.
func timeQuery(t *testing.T, db *sql.DB, query string, args []any) time.Duration {
	t.Helper()
	start := time.Now()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, query)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start).Round(time.Microsecond)
}

// genericPlan returns PostgreSQL's generic plan of query: the plan of a
// prepared statement that does not depend on its arguments' values.
func genericPlan(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer conn.ExecContext(context.WithoutCancel(ctx), "DEALLOCATE plan_of_test; RESET plan_cache_mode")
	if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "PREPARE plan_of_test AS "+query); err != nil {
		t.Fatalf("prepare: %v\n%s", err, query)
	}
	// EXECUTE takes its arguments as literals.
	lits := make([]string, len(args))
	for i, a := range args {
		if v, ok := a.(driver.Valuer); ok {
			a, _ = v.Value()
		}
		switch a := a.(type) {
		case nil:
			lits[i] = "NULL"
		case string:
			lits[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + a.Format(time.RFC3339Nano) + "'"
		default:
			lits[i] = fmt.Sprint(a)
		}
	}
	rows, err := conn.QueryContext(ctx, "EXPLAIN (COSTS OFF) EXECUTE plan_of_test("+strings.Join(lits, ", ")+")")
	if err != nil {
		t.Fatalf("explain the generic plan: %v\n%s", err, query)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "    "+l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// explain returns the plan of query with args.
func explain(t *testing.T, db *sql.DB, d jobs.Dialect, query string, args []any) string {
	t.Helper()
	prefix := "EXPLAIN (COSTS OFF) "
	if d == jobs.SQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := db.Query(prefix+query, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, query)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, "    "+fmt.Sprint(vals[len(vals)-1]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
