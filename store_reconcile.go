package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const (
	// Served by job_attempts_open_idx (updated_at, partial on open states).
	qStaleAttempts = `SELECT ` + attemptCols + ` FROM job_attempts
    WHERE state IN ('starting', 'running', 'unknown')
      AND updated_at < $3
      AND ((state = 'unknown' AND updated_at < $1) OR (state <> 'unknown' AND updated_at < $2))
    ORDER BY updated_at, id
    LIMIT $4`

	qClaimAttempt = `UPDATE job_attempts SET updated_at = $4
    WHERE id = $1 AND state = $2 AND updated_at = $3`
)

var qAttemptKind = `SELECT ` + qualify("a", attemptCols) + `, j.kind
    FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE a.id = $1`

// StaleAttempts implements ReconcileStore.
func (s *SQLStore) StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	upper := q.UnknownBefore
	if q.OpenBefore.After(upper) {
		upper = q.OpenBefore
	}
	return queryAll(ctx, s, s.rdb, "list stale attempts", scanAttempt, qStaleAttempts,
		s.d.ts(q.UnknownBefore), s.d.ts(q.OpenBefore), s.d.ts(upper), limit)
}

// ClaimAttempt implements ReconcileStore.
func (s *SQLStore) ClaimAttempt(ctx context.Context, c AttemptClaim) (bool, error) {
	var n int64
	err := s.withRetry(ctx, func() error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(qClaimAttempt),
			c.ID, string(c.State), s.d.ts(c.UpdatedAt), s.d.ts(c.At))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, s.d.interpret("claim attempt", err)
	}
	return n == 1, nil
}

// AttemptKind implements AttemptKindReader.
func (s *SQLStore) AttemptKind(ctx context.Context, attemptID string) (Attempt, string, error) {
	var a Attempt
	var kind string
	err := s.rdb.QueryRowContext(ctx, s.d.rebind(qAttemptKind), attemptID).Scan(append(attemptDest(&a), &kind)...)
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, "", fmt.Errorf("jobs: attempt %s: %w", attemptID, ErrNotFound)
	}
	if err != nil {
		return Attempt{}, "", s.d.interpret("get attempt", err)
	}
	return a, kind, nil
}

var (
	_ ReconcileStore    = (*SQLStore)(nil)
	_ AttemptKindReader = (*SQLStore)(nil)
)
