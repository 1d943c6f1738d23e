package mysql_test

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// planCase is one question of operators' tools, the index its plan must
// read, and how many rows it may read at most (0: any number).
type planCase struct {
	name    string
	query   string
	args    []any
	index   string // "" when the plan may read the whole table (a count)
	ordered bool   // read in the index's order: no sort
	maxRows int
}

// planCases are the questions the console and jobsctl ask, as the store
// asks them, over n jobs.
func planCases(n int, jobID, attemptID string, now time.Time) []planCase {
	c := func(name, index string, q string, args []any, ordered bool, maxRows int) planCase {
		return planCase{name, q, args, index, ordered, maxRows}
	}
	page := func(name string, q jobs.JobQuery) planCase {
		s, args := mysql.ListJobsSQL(q)
		return c(name, "PRIMARY", s, args, true, 1000)
	}
	byRef, byRefArgs := mysql.ListAttemptsSQL(jobs.AttemptQuery{ProviderRef: "ref-77", Newest: true, Limit: 50})
	inDoubt, inDoubtArgs := mysql.ListAttemptsSQL(jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}, Limit: 1000})
	count, countArgs := mysql.CountJobsSQL(jobs.JobQuery{States: []jobs.JobState{jobs.JobFailed}})
	countHour, countHourArgs := mysql.CountJobsSQL(jobs.JobQuery{CreatedAfter: now.Add(-time.Hour)})
	return []planCase{
		c("job by ID", "PRIMARY", "SELECT * FROM intentjobs_jobs WHERE id = ?", []any{jobID}, false, 1),
		c("job by owner and key", "intentjobs_jobs_owner_key_unique",
			"SELECT * FROM intentjobs_jobs WHERE owner = ? AND idempotency_key = ?", []any{"owner-77", "key-77"}, false, 1),
		c("attempt by ID", "PRIMARY", "SELECT * FROM intentjobs_attempts WHERE id = ?", []any{attemptID}, false, 1),
		c("attempt by provider reference", "intentjobs_attempts_provider_ref_idx", byRef, byRefArgs, false, 1),
		page("newest jobs, first page", jobs.JobQuery{Newest: true, Limit: 51}),
		page("newest jobs, a page deep in the list", jobs.JobQuery{Newest: true, After: jobID, Limit: 51}),
		page("oldest jobs, a page deep in the list", jobs.JobQuery{After: jobID, Limit: 51}),
		page("failed jobs of a kind and provider, a page",
			jobs.JobQuery{States: []jobs.JobState{jobs.JobFailed}, Kind: "charge", Provider: "stripe", Newest: true, After: jobID, Limit: 51}),
		// An owner filter has no index of its own: the page reads past the
		// other owners' jobs.
		func() planCase {
			pc := page("an owner's jobs, a page", jobs.JobQuery{Owner: "owner-7", Newest: true, Limit: 5})
			pc.maxRows = 0
			return pc
		}(),
		page("jobs created in the last hour, oldest first", jobs.JobQuery{CreatedAfter: now.Add(-time.Hour), Limit: 51}),
		page("jobs created over an hour ago, newest first", jobs.JobQuery{CreatedBefore: now.Add(-time.Hour), Newest: true, Limit: 51}),
		c("attempts in doubt", "intentjobs_attempts_one_in_doubt", inDoubt, inDoubtArgs, false, n/1000+1),
		c("count of failed jobs", "", count, countArgs, false, 0),
		c("count of jobs created in the last hour", "PRIMARY", countHour, countHourArgs, false, 3601),
	}
}

// The questions of operators' tools read the indexes: finding one intent
// reads one index entry, a page of a list reads the primary key in its
// order from the page's bound and stops once the page is full, and the
// queue of attempts in doubt reads the index of attempts in doubt. Each
// plan is checked with EXPLAIN, and on MariaDB run with ANALYZE, which
// counts the rows the query read (r_rows). Run with -v to see the plans
// (docs/mysql.md shows them); JOBS_TEST_LONG=1 fills the tables with a
// million jobs first, else with 20000.
func TestQueryPlansOfOperatorsTools(t *testing.T) {
	t.Parallel()
	n := size(1_000_000, 20_000)
	s := openStore(t)
	db := s.DB()
	now := time.Now().UTC()
	jobID, attemptID := fill(t, db, n, now)
	mariadb := strings.Contains(strings.ToLower(s.ServerVersion()), "mariadb")
	for _, pc := range planCases(n, jobID, attemptID, now) {
		prefix := "EXPLAIN "
		if mariadb {
			prefix = "ANALYZE "
		}
		plan := explain(t, db, prefix+pc.query, pc.args)
		took := timeQuery(t, db, pc.query, pc.args)
		t.Logf("%s (ran in %v over %d jobs):\n  %s\n%s", pc.name, took, n, pc.query, plan)
		for _, step := range plan.steps {
			if step["type"] == "ALL" && pc.index != "" {
				t.Errorf("%s: the plan reads the whole table:\n%s", pc.name, plan)
			}
			if pc.index != "" && step["key"] != pc.index {
				t.Errorf("%s: the plan does not read %s:\n%s", pc.name, pc.index, plan)
			}
			if pc.ordered && strings.Contains(step["Extra"], "filesort") {
				t.Errorf("%s: the plan sorts the rows it read instead of reading them in order:\n%s", pc.name, plan)
			}
			// A const read (one row by a unique key) has no count.
			if r, err := strconv.ParseFloat(step["r_rows"], 64); mariadb && pc.maxRows > 0 && step["type"] != "const" &&
				(err != nil || r > float64(pc.maxRows)) {
				t.Errorf("%s: the query read %s rows; want at most %d:\n%s", pc.name, step["r_rows"], pc.maxRows, plan)
			}
		}
	}
}

// The Manager's IDs begin with their creation's millisecond as the
// listings' age bounds expect.
func TestIDsBeginWithTheirMillisecond(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	m, clock := newManager(t, s)
	for i, step := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		clock.Advance(step)
		j, _, err := m.Submit(t.Context(), charge("o", fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.StartAttempt(t.Context(), j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if p := mysql.IDTimePrefix("job_", clock.Now()); !strings.HasPrefix(j.ID, p) {
			t.Errorf("job %s made at %v does not begin with %s", j.ID, clock.Now(), p)
		}
		if p := mysql.IDTimePrefix("att_", clock.Now()); !strings.HasPrefix(a.ID, p) {
			t.Errorf("attempt %s made at %v does not begin with %s", a.ID, clock.Now(), p)
		}
		if next := mysql.IDTimePrefix("job_", clock.Now().Add(time.Millisecond)); j.ID >= next {
			t.Errorf("job %s does not sort before the IDs of the next millisecond, %s", j.ID, next)
		}
	}
}

// randomID is an ID as the Manager makes it at t.
func randomID(prefix string, t time.Time) string {
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	b := make([]byte, 16)
	rand.Read(b)
	for i := range b {
		b[i] = crockford[b[i]%32]
	}
	return mysql.IDTimePrefix(prefix, t) + string(b)
}

// fill writes n jobs, each with one attempt, created a second apart up
// to now, as a service would have: a tenth failed, one in a thousand in
// doubt, the rest succeeded. It returns the IDs of the job and attempt in
// the middle.
func fill(t *testing.T, db *sql.DB, n int, now time.Time) (jobID, attemptID string) {
	t.Helper()
	const batch = 2000
	at := func(tm time.Time) string { return tm.Format("2006-01-02 15:04:05.000000") }
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
			jid, aid := randomID("job_", created), randomID("att_", created)
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
			jobRows = append(jobRows, "(?, ?, ?, ?, ?, '{}', 'fp', ?, 2, 1, ?, ?, ?, ?, ?)")
			jobArgs = append(jobArgs, jid, fmt.Sprint("owner-", i%1000), fmt.Sprint("key-", i), kind, provider, jobState,
				result, winner, at(created), at(created), closed)
			attRows = append(attRows, "(?, ?, 1, ?, ?, 1, ?, ?, ?, ?)")
			attArgs = append(attArgs, aid, jid, provider, attState, fmt.Sprint("ref-", i), at(created), at(created), finished)
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
	rows, err := db.Query("ANALYZE TABLE intentjobs_jobs, intentjobs_attempts")
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
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

// plan is what EXPLAIN or ANALYZE said: a step per table read, each
// column by name.
type plan struct{ steps []map[string]string }

func (p plan) String() string {
	var lines []string
	for _, s := range p.steps {
		line := fmt.Sprintf("    %s: %s on %s, rows %s", s["table"], s["type"], s["key"], s["rows"])
		if s["r_rows"] != "" {
			line += ", read " + s["r_rows"]
		}
		if s["Extra"] != "" {
			line += "; " + s["Extra"]
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// explain runs statement (EXPLAIN or ANALYZE of a query) with args.
func explain(t *testing.T, db *sql.DB, statement string, args []any) plan {
	t.Helper()
	rows, err := db.Query(statement, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, statement)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var p plan
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		step := map[string]string{}
		for i, c := range cols {
			step[c] = vals[i].String
		}
		p.steps = append(p.steps, step)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}
