package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// Complete offers the attempt's result to its job. The store performs a
// compare-and-swap on the job's version (pgCompleteJob and
// sqliteCompleteJob; see below): the result is written only if the job is still
// at the version the attempt read when it started and has no winner.
// Exactly one attempt of a job can win, and finishing order decides, not
// starting order.
//
// The winner's attempt becomes succeeded and Complete returns the job with the
// result. A loser's result is dropped, not stored anywhere: its attempt
// becomes lost, the race is logged at warning level, and Complete returns an
// error matching ErrLostRace whose LostRaceError names the winner. A result
// for a job that was cancelled meanwhile is dropped the same way: the
// attempt becomes cancelled with ReasonDroppedJobCancelled (so its
// ResultDropped reports that the provider acted, and the job keeps its key
// whatever the KeyReuse policy), the drop is logged at warning level and
// emitted as EventResultDropped, and the error matches ErrJobClosed.
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

// CompleteClaimed is Complete for the holder of a reconciler's claim on the
// attempt (see ClaimStore), such as package failover's Reconciler:
// claimToken names the claim, and the result is recorded, or refused by the
// contract, only while the claim holds. The holder's call is never taken
// for a repeat of an earlier one: if the attempt was resolved meanwhile it
// gets ErrInvalidTransition, and if its claim was taken over, ErrClaimLost.
// Anyone else calls Complete.
//
// Errors: those of Complete, and ErrClaimLost. An empty claimToken is
// invalid input.
func (m *Manager) CompleteClaimed(ctx context.Context, attemptID string, result json.RawMessage, claimToken string) (Job, error) {
	if claimToken == "" {
		return Job{}, invalid("claimToken", "empty")
	}
	return m.complete(ctx, attemptID, result, claimToken)
}

// complete is Complete for anyone (claimToken empty) or for the holder of a
// reconciler's claim on the attempt (CompleteClaimed).
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
		// The job was closed meanwhile: the provider acted anyway. The
		// attempt records it (ResultDropped), and its job keeps its key.
		m.logger.LogAttrs(ctx, slog.LevelWarn, "jobs: result dropped: the job was closed before it arrived",
			slog.String("job_id", a.JobID),
			slog.String("attempt_id", attemptID),
			slog.String("job_state", string(j.State)),
			slog.String("provider", a.Provider))
		m.emit(ctx, Event{Type: EventResultDropped, JobID: a.JobID, AttemptID: attemptID, Provider: a.Provider, Reason: a.Reason, Duration: time.Since(start)})
	}
	return Job{}, err
}

// The compare-and-swap.
//
// Every attempt records the job's version when it starts (BaseVersion).
// A result reaches the job only through one guarded UPDATE whose WHERE
// clause is the whole decision:
//
//	UPDATE intentjobs_jobs SET state = 'succeeded', result = $result, completed_by = $attempt,
//	                version = version + 1, …
//	 WHERE id = $job AND version = $base AND completed_by IS NULL AND state = 'running'
//
// Of several attempts racing to complete one job, the first whose UPDATE
// runs changes the row; every later one finds completed_by set (and the
// version moved on) and changes nothing. The database decides, not Go code
// that read the row earlier, so finishing order decides, whatever order
// the attempts started in, across goroutines, processes and machines.
//
// Who lost learns it from the same step: the attempt of a winning UPDATE
// becomes succeeded; the attempt of a refused one becomes lost (another
// attempt completed the job) or cancelled (the job was failed or cancelled
// without a winner), with a reason naming why, and its result is stored
// nowhere. The attempt must still be open (starting, running or unknown)
// and, for a reconciler's write, still claimed with the reconciler's token;
// otherwise nothing is written at all and the store reports the attempt as
// it is.
//
// The two dialects make that one atomic step in their own way:
//
//   - PostgreSQL runs it as two statements sent together, which end in one
//     Sync and so run as one implicit transaction, in one round trip
//     (pgCompleteJob, then pgCompleteFate; see pgCompletePipeline). The
//     compare-and-swap's sub-select locks the attempt (FOR NO KEY UPDATE):
//     a concurrent Cancel of the attempt waits, or has happened, so a job is
//     never completed by an attempt that was cancelled meanwhile. The swap's
//     UPDATE locks the job row, waiting for a winner or a close in flight.
//     The second statement takes a snapshot of its own, after the first
//     ended: it sees the job as this transaction completed it, or as the
//     winner or the close that refused the swap committed it, and records
//     the attempt's fate from that. Where two statements cannot be sent
//     together (unnamed statements or the simple protocol, as behind a
//     transaction pooler, or a driver wrapping pgx's), one statement of
//     data-modifying common table expressions does the same
//     (pgCompleteAttempt): it locks the attempt first, and when the swap
//     changes nothing it locks and reads the job (FOR UPDATE) to tell the
//     loser who won, since PostgreSQL returns the latest committed version
//     of a row it locks where a plain read would return the one the
//     statement's snapshot saw. Purge never waits for these locks (SKIP
//     LOCKED). TestPostgresCompleteAfterAWriteInFlight holds a Cancel, a
//     CancelJob and another attempt's Complete open until Complete waits
//     for it, on both forms; without either lock it fails.
//   - SQLite runs it in one immediate transaction (BEGIN IMMEDIATE takes
//     the database's write lock first): the guarded UPDATE of the job
//     reads the attempt with its claim in a subquery (sqliteCompleteJob),
//     then the attempt moves. No other writer can run in between: when the
//     UPDATE changed nothing, the attempt and the job read next are as the
//     UPDATE found them, and name the winner to a loser; a Cancel either
//     committed before the transaction began (the attempt is then found
//     closed, or its job not running) or waits for it to end.
//
// The conformance suite (jobstest) races 32 Completes of one job on every
// store and checks one winner and 31 losers naming it, and that finishing
// order decides; loosening the guard of either statement so that a
// succeeded job can be written again makes those cases fail. It also races
// Complete of two attempts against Cancel and CancelJob on 24 jobs at once
// (CancelRacesComplete): exactly one call decides each job.

// The reasons recorded on an attempt whose result was dropped, the values
// of DroppedReason. Every store records exactly these (PostgreSQL by
// passing the pieces to its statements), and the key-reuse guard of
// Store.ReplaceJob reads them back: see Attempt.ResultDropped.
const (
	reasonDroppedPrefix = "result dropped:" // no reason given by a caller starts so

	reasonLostPrefix   = "result dropped: attempt " // + the winner's ID
	reasonLostSuffix   = " completed the job first" //
	reasonClosedPrefix = "result dropped: job "     // + the job's state

	// ReasonDroppedJobCancelled is the reason recorded on an attempt whose
	// result arrived after its job was cancelled: the provider acted, but
	// the job takes no result any more. The attempt becomes cancelled.
	ReasonDroppedJobCancelled = reasonClosedPrefix + string(JobCancelled)

	// ReasonDroppedJobFailed is the same for a job that was given up with
	// FailJob. FailJob is refused while an attempt is open, so no store
	// should ever record it; it is named so that the guard covers it.
	ReasonDroppedJobFailed = reasonClosedPrefix + string(JobFailed)
)

// DroppedReason returns the reason a store records on an attempt whose
// result its job j did not take: "result dropped: attempt <winner>
// completed the job first" when another attempt completed j (the attempt
// becomes lost), or ReasonDroppedJobCancelled (or ReasonDroppedJobFailed)
// when j was closed without a winner (it becomes cancelled).
func DroppedReason(j Job) string {
	if j.CompletedBy != "" {
		return reasonLostPrefix + j.CompletedBy + reasonLostSuffix
	}
	return reasonClosedPrefix + string(j.State)
}

// ResultDropped reports whether the attempt finished with a result that its
// job did not take: it lost the race to another attempt, or its result
// arrived after the job was cancelled. Either way the provider acted on
// the intent, so a job with such an attempt never gives up its key (see
// KeyReuse).
func (a Attempt) ResultDropped() bool {
	switch a.State {
	case AttemptLost:
		return true
	case AttemptCancelled:
		return a.Reason == ReasonDroppedJobCancelled || a.Reason == ReasonDroppedJobFailed
	}
	return false
}
