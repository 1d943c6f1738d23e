package jobs

import (
	"context"
	"time"
)

// The capabilities for operators' tools: JobCounter, AttemptLister and
// LookupStore, and ListJobs (JobLister), built per query
// (store_sql_query.go).

var (
	_ JobCounter    = (*PostgresStore)(nil)
	_ AttemptLister = (*PostgresStore)(nil)
	_ LookupStore   = (*PostgresStore)(nil)
)

// pgRecordLookup records the last lookup of an attempt; the attempt's
// state, reason and update time stay.
const pgRecordLookup = `UPDATE intentjobs_attempts SET lookup_at = $2, lookup_answer = $3 WHERE id = $1`

// ListJobs implements JobLister.
func (s *PostgresStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listJobsQuery(Postgres, q)
	return queryAll(ctx, s.db, s, "list jobs", scanJob, qualifyTables(query, s.schema), args...)
}

// CountJobs implements JobCounter.
func (s *PostgresStore) CountJobs(ctx context.Context, q JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	query, args := countJobsQuery(Postgres, q)
	return queryOne(ctx, s.db, s, "count jobs", nil, scanValue[int64], qualifyTables(query, s.schema), args...)
}

// ListAttempts implements AttemptLister.
func (s *PostgresStore) ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listAttemptsQuery(Postgres, q)
	return queryAll(ctx, s.db, s, "list attempts", scanAttempt, qualifyTables(query, s.schema), args...)
}

// RecordLookup implements LookupStore.
func (s *PostgresStore) RecordLookup(ctx context.Context, l AttemptLookup) error {
	if err := l.Check(); err != nil {
		return err
	}
	n, err := rowsAffected(ctx, s.db, qualifyTables(pgRecordLookup, s.schema), l.AttemptID, l.At.UTC().Truncate(time.Microsecond), l.Answer)
	if err != nil {
		return s.interpret("record lookup", err)
	}
	if n == 0 {
		return attemptNotFound(l.AttemptID)
	}
	return nil
}

// ReconcileStates implements LookupStore.
func (s *PostgresStore) ReconcileStates(ctx context.Context, attemptIDs []string) ([]ReconcileState, error) {
	if len(attemptIDs) == 0 {
		return nil, nil
	}
	query, args := reconcileStatesQuery(Postgres, attemptIDs)
	return queryAll(ctx, s.db, s, "reconcile states", scanReconcileState, qualifyTables(query, s.schema), args...)
}
