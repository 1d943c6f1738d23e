package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const (
	// Served by job_attempts_stale_idx (updated_at, claimed_until; partial
	// on open states).
	qStaleAttempts = `SELECT ` + attemptCols + ` FROM job_attempts
    WHERE state IN ('starting', 'running', 'unknown')
      AND updated_at < $3
      AND ((state = 'unknown' AND updated_at < $1) OR (state <> 'unknown' AND updated_at < $2))
      AND (claimed_until IS NULL OR claimed_until <= $5)
    ORDER BY updated_at, id
    LIMIT $4`

	// A claim is taken on an attempt still as the reconciler read it, and
	// not claimed by anyone else: PostgreSQL re-evaluates the WHERE on a row
	// that a concurrent claim changed first, and SQLite runs one writer at a
	// time, so that of racing claims exactly one changes the row.
	qClaimAttempt = `UPDATE job_attempts SET claim_token = $4, claimed_until = $6
    WHERE id = $1 AND state = $2 AND updated_at = $3
      AND (claimed_until IS NULL OR claimed_until <= $5)
    RETURNING ` + attemptCols

	qRenewClaim = `UPDATE job_attempts SET claimed_until = $3 WHERE id = $1 AND claim_token = $2`

	qClaimToken = `SELECT claim_token FROM job_attempts WHERE id = $1`
)

var qAttemptKind = `SELECT ` + qualify("a", attemptCols) + `, j.kind
    FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE a.id = $1`

// endOfTime stands for "no bound" where a query compares claims with a time.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

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
	unclaimed := q.UnclaimedAt
	if unclaimed.IsZero() {
		unclaimed = endOfTime
	}
	return queryAll(ctx, s, s.rdb, "list stale attempts", scanAttempt, qStaleAttempts,
		s.d.ts(q.UnknownBefore), s.d.ts(q.OpenBefore), s.d.ts(upper), limit, s.d.ts(unclaimed))
}

// ClaimAttempt implements ReconcileStore.
func (s *SQLStore) ClaimAttempt(ctx context.Context, c AttemptClaim) (Attempt, bool, error) {
	var a Attempt
	err := s.withRetry(ctx, func() (err error) {
		a, err = scanAttempt(s.db.QueryRowContext(ctx, s.d.rebind(qClaimAttempt),
			c.ID, string(c.State), s.d.ts(c.UpdatedAt), c.Token, s.d.ts(c.At), s.d.ts(c.Until)))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, false, nil
	}
	if err != nil {
		return Attempt{}, false, s.d.interpret("claim attempt", err)
	}
	return a, true, nil
}

// RenewClaim implements ReconcileStore.
func (s *SQLStore) RenewClaim(ctx context.Context, c AttemptClaim) (bool, error) {
	var n int64
	err := s.withRetry(ctx, func() error {
		res, err := s.db.ExecContext(ctx, s.d.rebind(qRenewClaim), c.ID, c.Token, s.d.ts(c.Until))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, s.d.interpret("renew claim", err)
	}
	return n == 1, nil
}

// checkClaim returns an error matching ErrClaimLost unless token is empty
// or still the attempt's claim. Claims only ever pass to new tokens, so a
// token found gone stays gone.
func (s *SQLStore) checkClaim(ctx context.Context, q DBTX, attemptID, token string) error {
	if token == "" {
		return nil
	}
	var cur string
	err := q.QueryRowContext(ctx, s.d.rebind(qClaimToken), attemptID).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("jobs: attempt %s: %w", attemptID, ErrNotFound)
	}
	if err != nil {
		return s.d.interpret("check claim", err)
	}
	if cur != token {
		return fmt.Errorf("jobs: attempt %s: claim %s: %w", attemptID, token, ErrClaimLost)
	}
	return nil
}

var _ Store = (*SQLStore)(nil)
