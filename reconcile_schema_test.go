package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// TestStaleAttemptsUsesStaleIndex checks the plan of the reconcilers'
// query: it must read intentjobs_attempts_stale_idx, not scan the table.
func TestStaleAttemptsUsesStaleIndex(t *testing.T) {
	t.Parallel()
	now := time.Now()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewSQLite(t)
		ts := now.UnixMicro()
		plan := explainPlan(t, s.DB(), `EXPLAIN QUERY PLAN `+jobs.StaleAttemptsQuery(jobs.SQLite), ts, ts, ts, 10, ts)
		if !strings.Contains(plan, "intentjobs_attempts_stale_idx") {
			t.Errorf("plan does not use intentjobs_attempts_stale_idx:\n%s", plan)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewPostgres(t)
		ctx := context.Background()
		m, err := jobs.New(s, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			j := submitOK(t, m, chargeReq("u", fmt.Sprintf("k%d", i)))
			if _, err := m.StartAttempt(ctx, j.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		plan := postgresPlan(t, s.DB(), "intentjobs_attempts", jobs.StaleAttemptsQuery(jobs.Postgres), now, now, now, 10, now)
		if !strings.Contains(plan, "intentjobs_attempts_stale_idx") {
			t.Errorf("plan does not use intentjobs_attempts_stale_idx:\n%s", plan)
		}
	})
}
