package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// The capabilities for operators' tools: JobCounter, AttemptLister and
// LookupStore, and ListJobs (JobLister). See store_sql_query.go for the
// shape of the listings. A list of states is one string of
// space-separated names (" pending running "), as the statement searches
// it.

var (
	_ JobCounter    = (*SQLiteStore)(nil)
	_ AttemptLister = (*SQLiteStore)(nil)
	_ LookupStore   = (*SQLiteStore)(nil)
)

const (
	// ?1 and ?2 bound the IDs; ?3 to ?8 filter.
	sqliteJobsWhere = ` FROM intentjobs_jobs
    WHERE id > ?1 AND id < coalesce(?2, (SELECT max(id) FROM intentjobs_jobs) || 'Z')
      AND (?3 = '' OR owner = ?3)
      AND (?4 = '' OR instr(?4, ' ' || state || ' ') > 0)
      AND (?5 = '' OR kind = ?5)
      AND (?6 = '' OR provider = ?6)
      AND (?7 IS NULL OR created_at >= ?7)
      AND (?8 IS NULL OR created_at < ?8)`

	sqliteListJobs       = `SELECT ` + jobCols + sqliteJobsWhere + ` ORDER BY id LIMIT ?9`
	sqliteListJobsNewest = `SELECT ` + jobCols + sqliteJobsWhere + ` ORDER BY id DESC LIMIT ?9`
	sqliteCountJobs      = `SELECT count(*)` + sqliteJobsWhere

	// A count without an age filter reads the whole table, and a scan of
	// the table does that best: the same filters, no ID bounds.
	sqliteCountAllJobs = `SELECT count(*) FROM intentjobs_jobs
    WHERE (?1 = '' OR owner = ?1)
      AND (?2 = '' OR instr(?2, ' ' || state || ' ') > 0)
      AND (?3 = '' OR kind = ?3)
      AND (?4 = '' OR provider = ?4)`

	// ?1 and ?2 bound the IDs; ?3 to ?6 filter.
	sqliteAttemptsFilters = `
      AND id > ?1 AND id < coalesce(?2, (SELECT max(id) FROM intentjobs_attempts) || 'Z')
      AND (?3 = '' OR provider = ?3)
      AND (?4 = '' OR instr(?4, ' ' || state || ' ') > 0)
      AND (?5 IS NULL OR created_at >= ?5)
      AND (?6 IS NULL OR created_at < ?6)`

	// The same, for a statement that reads another index: +id, which no
	// index serves, keeps SQLite from walking the primary key's range
	// instead (it cannot tell that the range is everything).
	sqliteAttemptsFiltersByIndex = `
      AND +id > ?1 AND +id < coalesce(?2, (SELECT max(id) FROM intentjobs_attempts) || 'Z')
      AND (?3 = '' OR provider = ?3)
      AND (?4 = '' OR instr(?4, ' ' || state || ' ') > 0)
      AND (?5 IS NULL OR created_at >= ?5)
      AND (?6 IS NULL OR created_at < ?6)`

	sqliteListAttempts       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE true` + sqliteAttemptsFilters + ` ORDER BY id LIMIT ?7`
	sqliteListAttemptsNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE true` + sqliteAttemptsFilters + ` ORDER BY id DESC LIMIT ?7`

	// By intentjobs_attempts_one_in_doubt (its predicate, spelled alike).
	sqliteListInDoubt       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE state IN ('starting', 'unknown')` + sqliteAttemptsFiltersByIndex + ` ORDER BY id LIMIT ?7`
	sqliteListInDoubtNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE state IN ('starting', 'unknown')` + sqliteAttemptsFiltersByIndex + ` ORDER BY id DESC LIMIT ?7`

	// By intentjobs_attempts_provider_ref_idx (its predicate, spelled
	// alike); ?8 is the reference.
	sqliteListByRef       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE provider_ref = ?8 AND provider_ref <> ''` + sqliteAttemptsFiltersByIndex + ` ORDER BY id LIMIT ?7`
	sqliteListByRefNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE provider_ref = ?8 AND provider_ref <> ''` + sqliteAttemptsFiltersByIndex + ` ORDER BY id DESC LIMIT ?7`

	// The last lookup of an attempt; its state, reason and update time stay.
	sqliteRecordLookup = `UPDATE intentjobs_attempts SET lookup_at = ?2, lookup_answer = ?3 WHERE id = ?1`

	// ?1 is a JSON array of attempt IDs.
	sqliteReconcileStates = `SELECT id, lookup_at, lookup_answer, claim_token, claimed_until
    FROM intentjobs_attempts WHERE id IN (SELECT value FROM json_each(?1))`
)

// sqliteStates is a list of states as the statements search it.
func sqliteStates[T ~string](list []T) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range list {
		b.WriteString(" " + string(s))
	}
	return b.String() + " "
}

// sqliteMicros is t in Unix microseconds, or NULL for the zero time.
func sqliteMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// ListJobs implements JobLister.
func (s *SQLiteStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query := sqliteListJobs
	if q.Newest {
		query = sqliteListJobsNewest
	}
	lo, hi := idRange(jobPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	return queryAll(ctx, s.rdb, s, "list jobs", scanJob, query,
		lo, hi, q.Owner, sqliteStates(q.States), q.Kind, q.Provider, sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore), listLimit(q))
}

// CountJobs implements JobCounter.
func (s *SQLiteStore) CountJobs(ctx context.Context, q JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	if q.CreatedAfter.IsZero() && q.CreatedBefore.IsZero() {
		return queryOne(ctx, s.rdb, s, "count jobs", nil, scanValue[int64], sqliteCountAllJobs,
			q.Owner, sqliteStates(q.States), q.Kind, q.Provider)
	}
	lo, hi := idRange(jobPrefix, "", false, q.CreatedAfter, q.CreatedBefore)
	return queryOne(ctx, s.rdb, s, "count jobs", nil, scanValue[int64], sqliteCountJobs,
		lo, hi, q.Owner, sqliteStates(q.States), q.Kind, q.Provider, sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore))
}

// ListAttempts implements AttemptLister.
func (s *SQLiteStore) ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	lo, hi := idRange(attemptPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	args := []any{lo, hi, q.Provider, sqliteStates(q.States), sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore), limitOr100(q.Limit)}
	query := sqliteListAttempts
	switch {
	case q.ProviderRef != "" && q.Newest:
		query = sqliteListByRefNewest
	case q.ProviderRef != "":
		query = sqliteListByRef
	case inDoubtOnly(q.States) && q.Newest:
		query = sqliteListInDoubtNewest
	case inDoubtOnly(q.States):
		query = sqliteListInDoubt
	case q.Newest:
		query = sqliteListAttemptsNewest
	}
	if q.ProviderRef != "" {
		args = append(args, q.ProviderRef)
	}
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
	ids, err := json.Marshal(attemptIDs)
	if err != nil {
		return nil, err
	}
	return queryAll(ctx, s.rdb, s, "reconcile states", scanReconcileState, sqliteReconcileStates, string(ids))
}
