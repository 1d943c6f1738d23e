package jobs

import "context"

// The capabilities for operators' tools: JobCounter, AttemptLister and
// LookupStore, and ListJobs (JobLister), built per query
// (store_sql_query.go).

var (
	_ JobCounter    = (*SQLiteStore)(nil)
	_ AttemptLister = (*SQLiteStore)(nil)
	_ LookupStore   = (*SQLiteStore)(nil)
)

// sqliteRecordLookup records the last lookup of an attempt; the attempt's
// state, reason and update time stay.
const sqliteRecordLookup = `UPDATE intentjobs_attempts SET lookup_at = ?2, lookup_answer = ?3 WHERE id = ?1`

// ListJobs implements JobLister.
func (s *SQLiteStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listJobsQuery(SQLite, q)
	return queryAll(ctx, s.rdb, s, "list jobs", scanJob, query, args...)
}

// CountJobs implements JobCounter.
func (s *SQLiteStore) CountJobs(ctx context.Context, q JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	query, args := countJobsQuery(SQLite, q)
	return queryOne(ctx, s.rdb, s, "count jobs", nil, scanValue[int64], query, args...)
}

// ListAttempts implements AttemptLister.
func (s *SQLiteStore) ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listAttemptsQuery(SQLite, q)
	return queryAll(ctx, s.rdb, s, "list attempts", scanAttempt, query, args...)
}

// RecordLookup implements LookupStore.
func (s *SQLiteStore) RecordLookup(ctx context.Context, l AttemptLookup) error {
	if err := l.Check(); err != nil {
		return err
	}
	var n int64
	err := s.writeOne(ctx, "record lookup", func() (err error) {
		n, err = rowsAffected(ctx, s.db, sqliteRecordLookup, l.AttemptID, l.At.UnixMicro(), l.Answer)
		return err
	})
	if err != nil {
		return s.interpret("record lookup", err)
	}
	if n == 0 {
		return attemptNotFound(l.AttemptID)
	}
	return nil
}

// ReconcileStates implements LookupStore.
func (s *SQLiteStore) ReconcileStates(ctx context.Context, attemptIDs []string) ([]ReconcileState, error) {
	if len(attemptIDs) == 0 {
		return nil, nil
	}
	query, args := reconcileStatesQuery(SQLite, attemptIDs)
	return queryAll(ctx, s.rdb, s, "reconcile states", scanReconcileState, query, args...)
}
