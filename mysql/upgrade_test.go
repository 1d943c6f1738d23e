package mysql_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// versionOneDatabase is a database at schema version 1, as the store's
// first version left it, with jobs and attempts of every kind: a job
// completed by one attempt and lost by another, a job whose attempt is
// in doubt under an expired claim, and a pending job. It returns the DSN
// and a handle that sends scripts whole.
func versionOneDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := newDatabase(t, serverDSN(t))
	db := multiStatements(t, dsn)
	if _, err := db.Exec(mysql.MigrationList()[0].SQL); err != nil {
		t.Fatalf("0001_init.sql: %v", err)
	}
	fp := func(params string) string { return jobs.Fingerprint("charge", "stripe", json.RawMessage(params)) }
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
		      attempt_count, result, completed_by, created_at, updated_at, closed_at)
		    VALUES ('job_done', 'u', 'k-done', 'charge', 'stripe', '{"amount":1200}', ?, 'succeeded', 2, 2, '{"ok":true}',
		      'att_done', '2025-06-01 10:00:00', '2025-06-01 11:00:00', '2025-06-01 11:00:00')`, []any{fp(`{"amount":1200}`)}},
		{`INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, provider_ref, created_at,
		      updated_at, finished_at)
		    VALUES ('att_done', 'job_done', 1, 'stripe', 'succeeded', 1, 'ch_1', '2025-06-01 10:00:00',
		      '2025-06-01 11:00:00', '2025-06-01 11:00:00')`, nil},
		{`INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, reason, created_at,
		      updated_at, finished_at)
		    VALUES ('att_lost', 'job_done', 2, 'adyen', 'lost', 1, TRUE, ?, '2025-06-01 10:00:00',
		      '2025-06-01 11:00:00', '2025-06-01 11:00:00')`, []any{jobs.DroppedReason(jobs.Job{CompletedBy: "att_done"})}},
		{`INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
		      attempt_count, created_at, updated_at)
		    VALUES ('job_doubt', 'u', 'k-doubt', 'charge', 'stripe', '{"amount":5}', ?, 'running', 1, 1,
		      '2025-06-01 11:00:00', '2025-06-01 11:00:00')`, []any{fp(`{"amount":5}`)}},
		{`INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, provider_ref, reason,
		      created_at, updated_at, claim_token, claimed_until)
		    VALUES ('att_doubt', 'job_doubt', 1, 'stripe', 'unknown', 1, 'ch_2', 'timeout', '2025-06-01 11:00:00',
		      '2025-06-01 11:00:00', 'clm_old', '2025-06-01 11:30:00')`, nil},
		{`INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
		      created_at, updated_at)
		    VALUES ('job_new', 'v', 'k-new', 'charge', 'stripe', '{}', ?, 'pending', 1, '2025-06-01 12:00:00',
		      '2025-06-01 12:00:00')`, []any{fp(`{}`)}},
	} {
		if _, err := db.Exec(st.q, st.args...); err != nil {
			t.Fatalf("%v\n%s", err, st.q)
		}
	}
	return dsn, db
}

// versionOneRows returns every row of the version 1 tables, as text, in
// the order of their IDs, with version 1's columns.
func versionOneRows(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, result,
		   completed_by, reason, created_at, updated_at, closed_at, write_seq FROM intentjobs_jobs ORDER BY id`,
		`SELECT id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason, created_at, updated_at,
		   finished_at, claim_token, claimed_until, in_doubt_job FROM intentjobs_attempts ORDER BY id`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, v := range vals {
				parts = append(parts, fmt.Sprintf("%v", v))
			}
			out = append(out, strings.Join(parts, " | "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return out
}

// A database at schema version 1 is upgraded in place when a store opens
// it: the rows stay as they were, every attempt has no lookup yet, and the
// capabilities of version 2 work on the old rows at once.
func TestUpgradeFromVersionOne(t *testing.T) {
	t.Parallel()
	dsn, db := versionOneDatabase(t)
	before := versionOneRows(t, db)
	if _, err := mysql.Open(t.Context(), dsn, mysql.SkipMigrations()); err == nil {
		t.Fatal("SkipMigrations opened a database at version 1")
	}

	s := openStoreAt(t, dsn)
	ctx := t.Context()
	applied, err := s.AppliedMigrations(ctx)
	if err != nil || len(applied) != 2 || applied[1].Version != 2 || applied[1].Name != "0002_attempt_lookups.sql" {
		t.Fatalf("AppliedMigrations = %+v, %v", applied, err)
	}
	if diff := cmp.Diff(before, versionOneRows(t, db)); diff != "" {
		t.Errorf("the upgrade changed rows (-before +after):\n%s", diff)
	}

	states, err := s.ReconcileStates(ctx, []string{"att_doubt", "att_done", "att_none"})
	if err != nil || len(states) != 2 {
		t.Fatalf("ReconcileStates = %+v, %v", states, err)
	}
	slices.SortFunc(states, func(a, b jobs.ReconcileState) int { return strings.Compare(a.AttemptID, b.AttemptID) })
	want := []jobs.ReconcileState{
		{AttemptID: "att_done"},
		{AttemptID: "att_doubt", ClaimToken: "clm_old", ClaimedUntil: time.Date(2025, 6, 1, 11, 30, 0, 0, time.UTC)},
	}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("ReconcileStates of the old attempts (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		q    jobs.AttemptQuery
		want []string
	}{
		{jobs.AttemptQuery{ProviderRef: "ch_2"}, []string{"att_doubt"}},
		{jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}}, []string{"att_doubt"}},
		{jobs.AttemptQuery{Provider: "stripe", Newest: true}, []string{"att_doubt", "att_done"}},
	} {
		got, err := s.ListAttempts(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range got {
			ids = append(ids, a.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("ListAttempts(%+v) = %v; want %v", tc.q, ids, tc.want)
		}
	}
	if n, err := s.CountJobs(ctx, jobs.JobQuery{Owner: "u"}); err != nil || n != 2 {
		t.Errorf("CountJobs(owner u) = %d, %v; want 2", n, err)
	}

	// The reconciler's lookup is recorded on the old attempt, which then
	// resolves as any other.
	at := time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	if err := s.RecordLookup(ctx, jobs.AttemptLookup{AttemptID: "att_doubt", At: at, Answer: "succeeded"}); err != nil {
		t.Fatal(err)
	}
	states, err = s.ReconcileStates(ctx, []string{"att_doubt"})
	if err != nil || len(states) != 1 || !states[0].LookupAt.Equal(at) || states[0].LookupAnswer != "succeeded" {
		t.Fatalf("ReconcileStates after a lookup = %+v, %v", states, err)
	}
	m, _ := newManager(t, s)
	j, err := m.Complete(ctx, "att_doubt", json.RawMessage(`{"id":"ch_2"}`))
	if err != nil || j.State != jobs.JobSucceeded || j.CompletedBy != "att_doubt" {
		t.Fatalf("Complete of the old attempt = %+v, %v", j, err)
	}
}

// An upgrade that stopped half way, its columns added but not its index,
// runs again from its start when a store opens the database.
func TestUpgradeStoppedHalfWay(t *testing.T) {
	t.Parallel()
	dsn, db := versionOneDatabase(t)
	script := mysql.MigrationList()[1].SQL
	columns, _, ok := strings.Cut(script, "-- Attempts by their provider's reference")
	if !ok {
		t.Fatal("0002_attempt_lookups.sql has no part that adds the index")
	}
	if _, err := db.Exec(columns); err != nil {
		t.Fatalf("the first half of 0002_attempt_lookups.sql: %v", err)
	}
	if got := indexColumns(t, db, "intentjobs_attempts_provider_ref_idx"); got != "" {
		t.Fatalf("the first half made the index on %s", got)
	}
	s := openStoreAt(t, dsn)
	if v, err := s.DatabaseSchemaVersion(t.Context()); err != nil || v != 2 {
		t.Fatalf("DatabaseSchemaVersion = %d, %v; want 2", v, err)
	}
	if got := indexColumns(t, db, "intentjobs_attempts_provider_ref_idx"); got != "provider_ref(255)" {
		t.Errorf("after the upgrade ran again, the index is on %q", got)
	}
	got, err := s.ListAttempts(t.Context(), jobs.AttemptQuery{ProviderRef: "ch_1"})
	if err != nil || len(got) != 1 || got[0].ID != "att_done" {
		t.Errorf("ListAttempts by reference = %+v, %v", got, err)
	}
}
