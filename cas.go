package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// Complete offers the attempt's result to its job. The store performs a
// compare-and-swap on the job's version:
//
//	UPDATE jobs SET result = …, completed_by = …, state = 'succeeded', version = version + 1
//	WHERE id = $job AND version = $base AND completed_by IS NULL
//
// where $base is the version the attempt read when it started. Exactly one
// attempt of a job can win, and finishing order decides, not starting order.
//
// The winner's attempt becomes succeeded and Complete returns the job with the
// result. A loser's result is dropped, not stored anywhere: its attempt
// becomes lost, the race is logged at warning level, and Complete returns an
// error matching ErrLostRace whose LostRaceError names the winner. A result
// for a job that was cancelled meanwhile is dropped the same way, the attempt
// becomes cancelled and the error matches ErrJobClosed.
//
// Complete is safe to repeat: calling it again for the attempt that won
// returns the job and writes nothing; calling it again for a loser returns
// ErrLostRace again, and for an attempt whose job was closed, ErrJobClosed
// again. Once begun, the write is not abandoned
// when ctx is cancelled (it is bounded by Options.WriteTimeout), so a result
// that was paid for is not lost to an impatient caller.
//
// The result must be one JSON value that Submit would accept as params:
// valid UTF-8 without a lone surrogate, no duplicate object key, nesting no
// deeper than 128, and at most Options.MaxResultBytes. Anything else is
// refused with an *InputError for the Result before anything is written,
// the attempt staying as it was. The result is stored as given, not in
// canonical form.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrLostRace, ErrJobClosed,
// ErrInvalidTransition (the attempt was already failed or cancelled),
// ErrContractViolation, ErrStorage.
//
// When the job's kind has a contract (Options.Contracts), the result is
// validated first: a result that fails it marks the attempt failed with the
// reason, never reaches the job, and Complete returns a
// *ContractViolationError. With any contract registered, Complete reads the
// attempt's kind first (one extra read); without, it is one store call.
func (m *Manager) Complete(ctx context.Context, attemptID string, result json.RawMessage) (Job, error) {
	return m.complete(ctx, attemptID, result, "")
}

// complete is Complete for anyone (claimToken empty) or for the holder of a
// reconciler's claim on the attempt (see Completion.ClaimToken). The
// holder's call is never a repeat of an earlier one: if the attempt was
// resolved meanwhile, it gets ErrInvalidTransition, and if its claim was
// taken over, ErrClaimLost.
func (m *Manager) complete(ctx context.Context, attemptID string, result json.RawMessage, claimToken string) (Job, error) {
	if err := m.checkID(ctx, "attempt ID", attemptID); err != nil {
		return Job{}, err
	}
	if err := m.checkResult(result); err != nil {
		return Job{}, err
	}
	if len(m.contracts) > 0 {
		if err := m.checkContract(ctx, attemptID, result, claimToken); err != nil {
			return Job{}, err
		}
	}
	start := time.Now()
	wctx, cancel := m.writeContext(ctx)
	defer cancel()
	j, a, err := m.store.CompleteAttempt(wctx, Completion{AttemptID: attemptID, Result: result, At: m.now(), ClaimToken: claimToken})
	switch {
	case err == nil:
		m.emit(ctx, Event{Type: EventAttemptSucceeded, JobID: j.ID, AttemptID: attemptID, Provider: a.Provider, Duration: time.Since(start)})
		return j, nil
	case claimToken != "" && errors.Is(err, ErrInvalidTransition):
		// Resolved by someone else while the reconciler asked: not a repeat.
		return Job{}, err
	case errors.Is(err, ErrInvalidTransition) && a.State == AttemptSucceeded && j.CompletedBy == attemptID:
		// This attempt already won: a retried call after an ambiguous failure.
		return j, nil
	case errors.Is(err, ErrInvalidTransition) && a.State == AttemptLost:
		// Already lost: the same answer again, without logging the race twice.
		return Job{}, &LostRaceError{JobID: a.JobID, AttemptID: attemptID, WinnerID: j.CompletedBy}
	case errors.Is(err, ErrInvalidTransition) && a.State == AttemptCancelled && (j.State == JobCancelled || j.State == JobFailed):
		// The job was closed without a winner: the same answer as the call
		// that dropped this attempt's result, whether or not this is a retry.
		return Job{}, &JobClosedError{JobID: j.ID, State: j.State}
	}
	var lost *LostRaceError
	if errors.As(err, &lost) {
		m.logger.LogAttrs(ctx, slog.LevelWarn, "jobs: late result dropped",
			slog.String("job_id", lost.JobID),
			slog.String("attempt_id", lost.AttemptID),
			slog.String("winner_id", lost.WinnerID),
			slog.String("provider", a.Provider))
		m.emit(ctx, Event{Type: EventRaceLost, JobID: lost.JobID, AttemptID: attemptID, WinnerID: lost.WinnerID, Provider: a.Provider, Duration: time.Since(start)})
	} else if errors.Is(err, ErrJobClosed) && a.State == AttemptCancelled {
		// The job was closed meanwhile: the attempt was cancelled with it.
		m.emit(ctx, Event{Type: EventAttemptCancelled, JobID: a.JobID, AttemptID: attemptID, Provider: a.Provider, Reason: a.Reason, Duration: time.Since(start)})
	}
	return Job{}, err
}
