package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// TestSchemaRefusesRowsThatBreakTheStateRules writes rows by hand, past the
// library, that break the rules the schema's CHECK constraints keep: a state
// outside the lists, a closed job or finished attempt without its time (or
// the other way round), a winner on a job that did not succeed. The database
// must refuse each, and the row must stay as it was. A write that keeps the
// rules goes through, so that a schema that refused everything would fail
// too. Both dialects spell the constraints in their own way (SQLite without
// IN lists since version 4, PostgreSQL with array constants since version 6).
func TestSchemaRefusesRowsThatBreakTheStateRules(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) jobs.SQLStore{
		"sqlite":   func(t *testing.T) jobs.SQLStore { return testdb.NewSQLite(t) },
		"postgres": func(t *testing.T) jobs.SQLStore { return testdb.NewPostgres(t) },
	}
	for dialect, open := range stores {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := open(t)
			m, err := jobs.New(s, jobs.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "charge", Provider: "psp",
				Params: json.RawMessage(`{"amount":100}`)})
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.MarkRunning(ctx, a.ID, "ref-1"); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name, stmt string
			}{
				{"job state outside the list", `UPDATE intentjobs_jobs SET state = 'done' WHERE id = $1`},
				{"job failed without closed_at", `UPDATE intentjobs_jobs SET state = 'failed' WHERE id = $1`},
				{"job cancelled without closed_at", `UPDATE intentjobs_jobs SET state = 'cancelled' WHERE id = $1`},
				{"running job with closed_at", `UPDATE intentjobs_jobs SET closed_at = {now} WHERE id = $1`},
				{"job succeeded without a winner", `UPDATE intentjobs_jobs SET state = 'succeeded', closed_at = {now} WHERE id = $1`},
				{"running job with a winner", `UPDATE intentjobs_jobs SET completed_by = 'att_x', result = '{}' WHERE id = $1`},
				{"attempt state outside the list", `UPDATE intentjobs_attempts SET state = 'done' WHERE job_id = $1`},
				{"attempt lost without finished_at", `UPDATE intentjobs_attempts SET state = 'lost' WHERE job_id = $1`},
				{"attempt succeeded without finished_at", `UPDATE intentjobs_attempts SET state = 'succeeded' WHERE job_id = $1`},
				{"running attempt with finished_at", `UPDATE intentjobs_attempts SET finished_at = {now} WHERE job_id = $1`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := readState(t, m, j.ID)
					stmt := inDialect(dialect, tc.stmt)
					_, err := s.DB().ExecContext(ctx, stmt, j.ID)
					if err == nil || !strings.Contains(strings.ToLower(err.Error()), "check constraint") {
						t.Fatalf("%s: err = %v, want a CHECK constraint violation", stmt, err)
					}
					if after := readState(t, m, j.ID); after != before {
						t.Errorf("the refused write changed the job: %+v, was %+v", after, before)
					}
				})
			}
			// The rules kept: the attempt and the job fail, with their times.
			for _, stmt := range []string{
				`UPDATE intentjobs_attempts SET state = 'failed', finished_at = {now} WHERE job_id = $1`,
				`UPDATE intentjobs_jobs SET state = 'failed', closed_at = {now} WHERE id = $1`,
			} {
				stmt = inDialect(dialect, stmt)
				if _, err := s.DB().ExecContext(ctx, stmt, j.ID); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			if got := readState(t, m, j.ID); got.job != jobs.JobFailed || got.attempt != jobs.AttemptFailed || !got.closed {
				t.Errorf("after the writes that keep the rules: %+v, want the job and its attempt failed, closed", got)
			}
		})
	}
}

// inDialect writes stmt, whose time is {now} and whose argument is $1, in
// dialect's SQL: SQLite keeps times as Unix microseconds and numbers its
// arguments ?1.
func inDialect(dialect, stmt string) string {
	if dialect == "postgres" {
		return strings.ReplaceAll(stmt, "{now}", "now()")
	}
	return strings.NewReplacer("{now}", "CAST(unixepoch('subsec') * 1000000 AS INTEGER)", "$1", "?1").Replace(stmt)
}

// jobAndAttempt is what TestSchemaRefusesRowsThatBreakTheStateRules compares
// before and after a refused write.
type jobAndAttempt struct {
	job         jobs.JobState
	version     int64
	completedBy string
	closed      bool
	attempt     jobs.AttemptState
	finished    bool
}

func readState(t *testing.T, m *jobs.Manager, jobID string) jobAndAttempt {
	t.Helper()
	ctx := context.Background()
	j, err := m.Get(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	as, err := m.Attempts(ctx, jobID)
	if err != nil || len(as) != 1 {
		t.Fatalf("attempts of %s: %v, %v", jobID, as, err)
	}
	return jobAndAttempt{job: j.State, version: j.Version, completedBy: j.CompletedBy, closed: !j.ClosedAt.IsZero(),
		attempt: as[0].State, finished: !as[0].FinishedAt.IsZero()}
}
