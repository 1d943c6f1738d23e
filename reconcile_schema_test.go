package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// writeSchemaV2 puts a database at schema version 2 by hand, with the data
// of writeSchemaV1: among it an attempt left unknown without a provider
// reference, as the reconciler's claims were before they had columns.
func writeSchemaV2(t testing.TB, db *sql.DB, dialect jobs.Dialect) {
	t.Helper()
	writeSchemaV1(t, db, dialect)
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	// Version 2 records itself in jobs_schema_migrations.
	if _, err := db.Exec(ms[1].SQL); err != nil {
		t.Fatalf("schema v2: %v\n%s", err, ms[1].SQL)
	}
}

// TestUpgradeFromSchemaV2ReconcilesOldAttempts opens a database at schema
// version 2 with an attempt in doubt in it: opening adds the claim columns,
// and a reconciler claims that attempt and resolves it by its key.
func TestUpgradeFromSchemaV2ReconcilesOldAttempts(t *testing.T) {
	t.Parallel()
	for _, dialect := range []jobs.Dialect{jobs.SQLite, jobs.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openUpgraded(t, dialect, writeSchemaV2)
			checkMigrationsRecorded(t, s)
			ev := &events{}
			now := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
			m, err := jobs.New(s, jobs.Options{Clock: jobstest.NewClock(now), Logger: discard, Observer: ev})
			if err != nil {
				t.Fatal(err)
			}
			stripe := &fakeProvider{name: "stripe"}
			stripe.setOutcome("att_doubt", jobs.Outcome{State: jobs.OutcomeSucceeded, Result: json.RawMessage(`{"ok":true}`)})
			rec := &jobs.Reconciler{Manager: m, Providers: map[string]jobs.Provider{"stripe": stripe}}
			rep, err := rec.ReconcileOnce(ctx)
			if err != nil || rep.Examined != 1 || len(rep.Resolved) != 1 || rep.Resolved[0].AttemptID != "att_doubt" {
				t.Fatalf("ReconcileOnce = %+v, %v; want att_doubt resolved", rep, err)
			}
			if j, err := m.Get(ctx, "job_doubt"); err != nil || j.State != jobs.JobSucceeded || j.CompletedBy != "att_doubt" {
				t.Errorf("job_doubt = %s by %s, %v", j.State, j.CompletedBy, err)
			}
			var token string
			if err := s.DB().QueryRow(`SELECT claim_token FROM job_attempts WHERE id = 'att_doubt'`).Scan(&token); err != nil || !strings.HasPrefix(token, "clm_") {
				t.Errorf("claim token of att_doubt = %q, %v", token, err)
			}
			checkNoViolations(t, s)
		})
	}
}

// TestStaleAttemptsUsesStaleIndex checks the plan of the reconcilers'
// query: it must read job_attempts_stale_idx, not scan the table.
func TestStaleAttemptsUsesStaleIndex(t *testing.T) {
	t.Parallel()
	now := time.Now()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewSQLite(t)
		ts := now.UnixMicro()
		plan := explainPlan(t, s.DB(), `EXPLAIN QUERY PLAN `+jobs.StaleAttemptsQuery("sqlite"), ts, ts, ts, 10, ts)
		if !strings.Contains(plan, "job_attempts_stale_idx") {
			t.Errorf("plan does not use job_attempts_stale_idx:\n%s", plan)
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
		plan := postgresPlan(t, s.DB(), "job_attempts", jobs.StaleAttemptsQuery("postgres"), now, now, now, 10, now)
		if !strings.Contains(plan, "job_attempts_stale_idx") {
			t.Errorf("plan does not use job_attempts_stale_idx:\n%s", plan)
		}
	})
}
