package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/intentjobs/jobs"
)

// Attempt implements jobs.Store.
func (s *Store) Attempt(ctx context.Context, id string) (jobs.Attempt, error) {
	a, err := scanAttempt(s.db.QueryRowContext(ctx, qAttemptByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Attempt{}, attemptNotFound(id)
	}
	return a, interpret("get attempt", err)
}

// Attempts implements jobs.Store.
func (s *Store) Attempts(ctx context.Context, jobID string) ([]jobs.Attempt, error) {
	out, err := queryAll(ctx, s.db, "list attempts", scanAttempt, qAttempts, jobID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	// No attempt: is there a job?
	var one int
	err = s.db.QueryRowContext(ctx, qJobExists, jobID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, jobNotFound(jobID)
	}
	return out, interpret("list attempts", err)
}

// CreateAttempt implements jobs.Store, in one transaction: it locks the
// job's row, refuses a terminal job or one with an attempt that blocks
// the new one, and inserts the attempt with the next Seq and the job's
// version as its BaseVersion. Every write of an attempt of the job takes
// the job's row lock too, so what the guard read stays true until the
// commit; the unique index on attempts in doubt backs it up.
func (s *Store) CreateAttempt(ctx context.Context, na jobs.NewAttempt) (jobs.Attempt, error) {
	var out jobs.Attempt
	err := s.inTx(ctx, "start attempt", func(tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, qLockJob, na.JobID))
		if errors.Is(err, sql.ErrNoRows) {
			return jobNotFound(na.JobID)
		}
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			return &jobs.JobClosedError{JobID: j.ID, State: j.State}
		}
		b, err := scanBlocker(tx.QueryRowContext(ctx, qBlocker, na.JobID))
		switch {
		case err == nil && (b.State != jobs.AttemptRunning || !na.Hedge):
			b.JobID = na.JobID
			return b
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		provider := na.Provider
		if provider == "" {
			provider = j.Provider
		}
		seq := j.Attempts + 1
		at := dbTime(na.At)
		if _, err := tx.ExecContext(ctx, qInsertAttempt, na.ID, na.JobID, seq, provider, j.Version, na.Hedge, at, at); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qJobStarted, seq, at, na.JobID); err != nil {
			return err
		}
		out = jobs.Attempt{ID: na.ID, JobID: na.JobID, Seq: seq, Provider: provider, State: jobs.AttemptStarting,
			BaseVersion: j.Version, Hedge: na.Hedge, CreatedAt: stored(na.At), UpdatedAt: stored(na.At)}
		return nil
	})
	if err != nil {
		return jobs.Attempt{}, s.unexpected("start attempt", err)
	}
	return out, nil
}

// lockAttempt reads the attempt id and its job, locking both rows (the
// attempt first), and the attempt's claim token.
func lockAttempt(ctx context.Context, tx *sql.Tx, id string) (jobs.Attempt, jobs.Job, string, error) {
	var token string
	var j jobRow
	a, err := scanAttemptAnd(tx.QueryRowContext(ctx, qLockAttemptAndJob, id), append([]any{&token}, j.dest()...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return jobs.Attempt{}, jobs.Job{}, "", attemptNotFound(id)
	}
	if err != nil {
		return jobs.Attempt{}, jobs.Job{}, "", err
	}
	return a, j.job(), token, nil
}

func claimLost(attemptID, token string) error {
	return fmt.Errorf("jobs/mysql: attempt %s: claim %s: %w", attemptID, token, jobs.ErrClaimLost)
}

// UpdateAttempt implements jobs.Store, in one transaction that locks the
// attempt and its job and decides on what it locked: the claim, the
// state the move starts from, a provider reference already recorded, and
// for a move to unknown another attempt of the job in doubt.
func (s *Store) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	if err := u.Check(); err != nil {
		return jobs.Attempt{}, err
	}
	var out jobs.Attempt
	err := s.inTx(ctx, "update attempt", func(tx *sql.Tx) error {
		a, _, token, err := lockAttempt(ctx, tx, u.ID)
		out = a
		if err != nil {
			return err
		}
		if u.ClaimToken != "" && token != u.ClaimToken {
			return claimLost(u.ID, u.ClaimToken)
		}
		if a.State.Terminal() || !slices.Contains(u.From, a.State) || (u.ProviderRef != "" && a.ProviderRef != "") {
			return &jobs.TransitionError{AttemptID: u.ID, From: a.State, To: u.To}
		}
		if u.To == jobs.AttemptUnknown && a.State != jobs.AttemptUnknown {
			// At most one attempt in doubt: the job's row is locked, and
			// the touch makes this write conflict on Galera with a
			// concurrent attempt started through another node.
			if _, err := tx.ExecContext(ctx, qTouchJob, a.JobID); err != nil {
				return err
			}
			b, err := scanBlocker(tx.QueryRowContext(ctx, qOtherInDoubt, a.JobID, a.ID))
			if err == nil {
				b.JobID = a.JobID
				return b
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		next := a
		next.State = u.To
		if u.ProviderRef != "" {
			next.ProviderRef = u.ProviderRef
		}
		if u.Reason != "" {
			next.Reason = u.Reason
		}
		next.UpdatedAt = stored(u.At)
		if u.To.Terminal() {
			next.FinishedAt = next.UpdatedAt
		}
		if _, err := tx.ExecContext(ctx, qUpdateAttempt, string(next.State), next.ProviderRef, next.Reason,
			dbTime(u.At), nullTime(next.FinishedAt), u.ID); err != nil {
			return err
		}
		out = next
		return nil
	})
	if errors.Is(err, errUniqueInDoubt) {
		err = s.unexpected("update attempt", err)
	}
	if err != nil && !errors.Is(err, jobs.ErrNotFound) {
		return out, err
	}
	if err != nil {
		return jobs.Attempt{}, err
	}
	return out, nil
}

// CompleteAttempt implements jobs.Store: the compare-and-swap, in one
// transaction that locks the attempt and its job. If the attempt is open
// (and, for a reconciler, still claimed with its token) and the job is
// running, without a winner and at the attempt's BaseVersion, the job
// takes the result and the attempt succeeds; otherwise the attempt's
// fate is recorded from the job as locked: lost to the winner, or
// cancelled if the job was closed without one. Both rows commit together
// or not at all.
func (s *Store) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	var j jobs.Job
	var a jobs.Attempt
	err := s.inTx(ctx, "complete attempt", func(tx *sql.Tx) error {
		var token string
		var err error
		a, j, token, err = lockAttempt(ctx, tx, c.AttemptID)
		if err != nil {
			return err
		}
		if c.ClaimToken != "" && token != c.ClaimToken {
			return claimLost(a.ID, c.ClaimToken)
		}
		if !a.State.Open() {
			return &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: jobs.AttemptSucceeded}
		}
		at := stored(c.At)
		if j.State == jobs.JobRunning && j.CompletedBy == "" && j.Version == a.BaseVersion {
			t := dbTime(at)
			res, err := tx.ExecContext(ctx, qCompleteJob, string(c.Result), t, t, t, t, j.ID, j.Version, a.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 2 {
				return fmt.Errorf("jobs/mysql: the compare-and-swap of job %s changed %d rows under its lock (%v)", j.ID, n, err)
			}
			j.State, j.Result, j.CompletedBy, j.Version = jobs.JobSucceeded, c.Result, a.ID, j.Version+1
			j.UpdatedAt, j.ClosedAt = at, at
			a.State, a.UpdatedAt, a.FinishedAt = jobs.AttemptSucceeded, at, at
			return nil
		}
		// The result is dropped: stored nowhere, and the attempt records
		// why.
		fate := jobs.AttemptCancelled
		if j.CompletedBy != "" {
			fate = jobs.AttemptLost
		}
		reason := jobs.DroppedReason(j)
		if _, err := tx.ExecContext(ctx, qAttemptFate, string(fate), reason, dbTime(at), dbTime(at), a.ID); err != nil {
			return err
		}
		a.State, a.Reason, a.UpdatedAt, a.FinishedAt = fate, reason, at, at
		return nil
	})
	if err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return jobs.Job{}, jobs.Attempt{}, err
		}
		return j, a, err
	}
	switch a.State {
	case jobs.AttemptLost:
		return j, a, &jobs.LostRaceError{JobID: j.ID, AttemptID: a.ID, WinnerID: j.CompletedBy}
	case jobs.AttemptCancelled:
		return j, a, &jobs.JobClosedError{JobID: j.ID, State: j.State}
	}
	s.notify.wake(j.ID)
	return j, a, nil
}
