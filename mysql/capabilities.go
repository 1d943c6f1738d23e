package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// endOfTime stands for "no bound" where a query compares claims with a
// time.
var endOfTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// StaleAttempts implements jobs.ClaimStore.
func (s *Store) StaleAttempts(ctx context.Context, q jobs.StaleQuery) ([]jobs.Attempt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	unclaimed := q.UnclaimedAt
	if unclaimed.IsZero() {
		unclaimed = endOfTime
	}
	return queryAll(ctx, s.db, "list stale attempts", scanAttempt, qStaleAttempts,
		boundTime(q.UnknownBefore), boundTime(q.OpenBefore), dbTime(unclaimed), limit)
}

// ClaimAttempt implements jobs.ClaimStore: under the attempt's row lock,
// it claims an attempt still open, in the state and last updated at the
// time the reconciler read, and not claimed beyond c.At. Of racing
// claims, the first to lock the row claims it, and the others find the
// claim; on Galera, claims made through two nodes at once conflict at
// certification, and the loser, run again, finds the claim.
func (s *Store) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	if err := c.Check(); err != nil {
		return jobs.Attempt{}, false, err
	}
	if !c.State.Open() { // only an attempt in doubt is reconciled
		return jobs.Attempt{}, false, nil
	}
	var out jobs.Attempt
	var claimed bool
	err := s.inTx(ctx, "claim attempt", func(tx *sql.Tx) error {
		claimed = false
		var token string
		var until time.Time
		a, err := scanAttemptAnd(tx.QueryRowContext(ctx, qLockClaim, c.ID), &token, timeCol{&until})
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if a.State != c.State || !a.UpdatedAt.Equal(stored(c.UpdatedAt)) || (!until.IsZero() && until.After(stored(c.At))) {
			return nil
		}
		if _, err := tx.ExecContext(ctx, qClaim, c.Token, dbTime(c.Until), c.ID); err != nil {
			return err
		}
		out, claimed = a, true
		return nil
	})
	if err != nil || !claimed {
		return jobs.Attempt{}, false, err
	}
	return out, true, nil
}

// RenewClaim implements jobs.ClaimStore.
func (s *Store) RenewClaim(ctx context.Context, c jobs.AttemptClaim) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	var renewed bool
	err := s.inTx(ctx, "renew claim", func(tx *sql.Tx) error {
		renewed = false
		var token string
		var until time.Time
		_, err := scanAttemptAnd(tx.QueryRowContext(ctx, qLockClaim, c.ID), &token, timeCol{&until})
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil || token != c.Token {
			return err
		}
		if _, err := tx.ExecContext(ctx, qRenewClaim, dbTime(c.Until), c.ID); err != nil {
			return err
		}
		renewed = true
		return nil
	})
	return renewed, err
}

// RecordVerification implements jobs.VerificationStore.
func (s *Store) RecordVerification(ctx context.Context, v jobs.Verification) error {
	return s.retrying(ctx, "record verification", func() error {
		_, err := s.db.ExecContext(ctx, qRecordVerification, v.ID, v.Provider, v.Kind, v.ContractVersion, v.Passed, v.Reason,
			dbTime(v.VerifiedAt), nullTime(v.ExpiresAt))
		return err
	})
}

// Verifications implements jobs.VerificationStore.
func (s *Store) Verifications(ctx context.Context, f jobs.VerificationFilter) ([]jobs.Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.db, "list verifications", scanVerification, qVerifications,
		f.Provider, f.Provider, f.Kind, f.Kind, f.ContractVersion, f.ContractVersion, limit)
}

// PurgeJobs implements jobs.PurgeStore: one transaction per batch, which
// never waits for a row lock. It locks the purgeable jobs with SKIP
// LOCKED, then their attempts the same way, and deletes only the jobs
// whose every attempt it could lock, with those attempts: a writer holding
// a job or one of its attempts keeps that job for a later batch.
func (s *Store) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	var n jobs.PurgeCount
	before := boundTime(q.Before)
	if q.DryRun {
		err := s.db.QueryRowContext(ctx, qCountPurgeable, before, before).Scan(&n.Jobs, &n.Attempts)
		return n, interpret("purge", err)
	}
	if q.Limit <= 0 {
		return n, nil
	}
	err := s.inTx(ctx, "purge", func(tx *sql.Tx) error {
		n = jobs.PurgeCount{}
		type victim struct {
			id       string
			attempts int
		}
		victims, err := queryAll(ctx, tx, "purge", func(sc scanner) (victim, error) {
			var v victim
			return v, sc.Scan(&v.id, &v.attempts)
		}, qPurgeVictims, before, before, q.Limit)
		if err != nil || len(victims) == 0 {
			return err
		}
		ids := make([]any, len(victims))
		for i, v := range victims {
			ids[i] = v.id
		}
		in := placeholders(len(ids))
		type att struct{ id, jobID string }
		atts, err := queryAll(ctx, tx, "purge", func(sc scanner) (att, error) {
			var a att
			return a, sc.Scan(&a.id, &a.jobID)
		}, `SELECT id, job_id FROM intentjobs_attempts WHERE job_id IN (`+in+`) FOR UPDATE SKIP LOCKED`, ids...)
		if err != nil {
			return err
		}
		locked := map[string]int{}
		for _, a := range atts {
			locked[a.jobID]++
		}
		var jobIDs []any
		for _, v := range victims {
			if locked[v.id] == v.attempts {
				jobIDs = append(jobIDs, v.id)
			}
		}
		if len(jobIDs) == 0 {
			return nil
		}
		in = placeholders(len(jobIDs))
		res, err := tx.ExecContext(ctx, `DELETE FROM intentjobs_attempts WHERE job_id IN (`+in+`)`, jobIDs...)
		if err != nil {
			return err
		}
		if n.Attempts, err = res.RowsAffected(); err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM intentjobs_jobs WHERE id IN (`+in+`)`, jobIDs...)
		if err != nil {
			return err
		}
		n.Jobs, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return jobs.PurgeCount{}, err
	}
	return n, nil
}

// placeholders returns "?, ?, …", n of them.
func placeholders(n int) string {
	return "?" + strings.Repeat(", ?", n-1)
}
