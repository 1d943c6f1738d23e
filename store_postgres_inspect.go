package jobs

import (
	"context"
	"time"
)

// The capabilities for operators' tools: JobCounter, AttemptLister and
// LookupStore, and ListJobs (JobLister). See store_sql_query.go for the
// shape of the listings.

var (
	_ JobCounter    = (*PostgresStore)(nil)
	_ AttemptLister = (*PostgresStore)(nil)
	_ LookupStore   = (*PostgresStore)(nil)
)

const (
	// $1 and $2 bound the IDs; $3 to $8 filter.
	pgJobsWhere = ` FROM intentjobs_jobs
    WHERE id > $1 AND id < COALESCE($2, (SELECT max(id) FROM intentjobs_jobs) || 'Z')
      AND ($3 = '' OR owner = $3)
      AND (cardinality($4::text[]) = 0 OR state = ANY ($4::text[]))
      AND ($5 = '' OR kind = $5)
      AND ($6 = '' OR provider = $6)
      AND ($7::timestamptz IS NULL OR created_at >= $7)
      AND ($8::timestamptz IS NULL OR created_at < $8)`

	pgListJobs       = `SELECT ` + jobCols + pgJobsWhere + ` ORDER BY id LIMIT $9`
	pgListJobsNewest = `SELECT ` + jobCols + pgJobsWhere + ` ORDER BY id DESC LIMIT $9`
	pgCountJobs      = `SELECT count(*)` + pgJobsWhere

	// A count without an age filter reads the whole table, and a
	// sequential scan does that best: the same filters, no ID bounds.
	pgCountAllJobs = `SELECT count(*) FROM intentjobs_jobs
    WHERE ($1 = '' OR owner = $1)
      AND (cardinality($2::text[]) = 0 OR state = ANY ($2::text[]))
      AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR provider = $4)`

	// $1 and $2 bound the IDs; $3 to $6 filter.
	pgAttemptsFilters = `
      AND id > $1 AND id < COALESCE($2, (SELECT max(id) FROM intentjobs_attempts) || 'Z')
      AND ($3 = '' OR provider = $3)
      AND (cardinality($4::text[]) = 0 OR state = ANY ($4::text[]))
      AND ($5::timestamptz IS NULL OR created_at >= $5)
      AND ($6::timestamptz IS NULL OR created_at < $6)`

	// Every attempt, by the primary key.
	pgListAttempts       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE true` + pgAttemptsFilters + ` ORDER BY id LIMIT $7`
	pgListAttemptsNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE true` + pgAttemptsFilters + ` ORDER BY id DESC LIMIT $7`

	// The attempts in doubt, by intentjobs_attempts_one_in_doubt (its
	// predicate, spelled alike).
	pgListInDoubt       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE state IN ('starting', 'unknown')` + pgAttemptsFilters + ` ORDER BY id LIMIT $7`
	pgListInDoubtNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE state IN ('starting', 'unknown')` + pgAttemptsFilters + ` ORDER BY id DESC LIMIT $7`

	// The attempts with a provider reference, $8, by
	// intentjobs_attempts_provider_ref_idx (its predicate, spelled alike).
	pgListByRef       = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE provider_ref = $8 AND provider_ref <> ''` + pgAttemptsFilters + ` ORDER BY id LIMIT $7`
	pgListByRefNewest = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE provider_ref = $8 AND provider_ref <> ''` + pgAttemptsFilters + ` ORDER BY id DESC LIMIT $7`

	// The last lookup of an attempt; its state, reason and update time stay.
	pgRecordLookup = `UPDATE intentjobs_attempts SET lookup_at = $2, lookup_answer = $3 WHERE id = $1`

	pgReconcileStates = `SELECT id, lookup_at, lookup_answer, claim_token, claimed_until
    FROM intentjobs_attempts WHERE id = ANY ($1::text[])`
)

// pgTexts is a list of names as a text[] argument.
func pgTexts[T ~string](list []T) pgTextArray {
	out := make(pgTextArray, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// ListJobs implements JobLister.
func (s *PostgresStore) ListJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query := pgListJobs
	if q.Newest {
		query = pgListJobsNewest
	}
	lo, hi := idRange(jobPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	return queryAll(ctx, s.db, s, "list jobs", scanJob, qualifyTables(query, s.schema),
		lo, hi, q.Owner, pgTexts(q.States), q.Kind, q.Provider, nullTime(q.CreatedAfter), nullTime(q.CreatedBefore), listLimit(q))
}

// CountJobs implements JobCounter.
func (s *PostgresStore) CountJobs(ctx context.Context, q JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	if q.CreatedAfter.IsZero() && q.CreatedBefore.IsZero() {
		return queryOne(ctx, s.db, s, "count jobs", nil, scanValue[int64], qualifyTables(pgCountAllJobs, s.schema),
			q.Owner, pgTexts(q.States), q.Kind, q.Provider)
	}
	lo, hi := idRange(jobPrefix, "", false, q.CreatedAfter, q.CreatedBefore)
	return queryOne(ctx, s.db, s, "count jobs", nil, scanValue[int64], qualifyTables(pgCountJobs, s.schema),
		lo, hi, q.Owner, pgTexts(q.States), q.Kind, q.Provider, nullTime(q.CreatedAfter), nullTime(q.CreatedBefore))
}

// ListAttempts implements AttemptLister.
func (s *PostgresStore) ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	lo, hi := idRange(attemptPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	args := []any{lo, hi, q.Provider, pgTexts(q.States), nullTime(q.CreatedAfter), nullTime(q.CreatedBefore), limitOr100(q.Limit)}
	query := pgListAttempts
	switch {
	case q.ProviderRef != "" && q.Newest:
		query = pgListByRefNewest
	case q.ProviderRef != "":
		query = pgListByRef
	case inDoubtOnly(q.States) && q.Newest:
		query = pgListInDoubtNewest
	case inDoubtOnly(q.States):
		query = pgListInDoubt
	case q.Newest:
		query = pgListAttemptsNewest
	}
	if q.ProviderRef != "" {
		args = append(args, q.ProviderRef)
	}
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
	return queryAll(ctx, s.db, s, "reconcile states", scanReconcileState, qualifyTables(pgReconcileStates, s.schema), pgTexts(attemptIDs))
}
