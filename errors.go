package jobs

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by a Manager matches at most one of them
// with errors.Is; the typed errors below carry the details for errors.As.
var (
	// ErrNotFound means no job or attempt has the given ID (or owner and key).
	ErrNotFound = errors.New("jobs: not found")

	// ErrKeyConflict means the idempotency key is already bound to a job with a
	// different intent (kind, provider or params). See KeyConflictError.
	ErrKeyConflict = errors.New("jobs: idempotency key already used for a different request")

	// ErrAttemptInFlight means a new attempt (or giving up on the job) was refused
	// because another attempt is starting, running or unknown. See AttemptInFlightError.
	ErrAttemptInFlight = errors.New("jobs: another attempt is in flight")

	// ErrLostRace means the attempt finished after another attempt had already
	// completed the job. Its result was dropped. See LostRaceError.
	ErrLostRace = errors.New("jobs: another attempt already completed the job")

	// ErrInvalidTransition means the attempt's current state does not allow the
	// requested change. Nothing was written. See TransitionError.
	ErrInvalidTransition = errors.New("jobs: invalid state transition")

	// ErrJobClosed means the job is succeeded, failed or cancelled and accepts no
	// new attempt and no further outcome. See JobClosedError.
	ErrJobClosed = errors.New("jobs: job is closed")

	// ErrProviderUnverified means a failover attempt was refused because the
	// provider has no passing, unexpired verification for the job's kind.
	ErrProviderUnverified = errors.New("jobs: provider not verified for this kind")

	// ErrContractViolation means a result failed the semantic contract of its
	// job's kind. The attempt failed; the result never reached the job.
	ErrContractViolation = errors.New("jobs: result violates the kind's contract")

	// ErrInvalidInput means an argument was rejected before anything was written.
	// See InputError.
	ErrInvalidInput = errors.New("jobs: invalid input")

	// ErrStorage means the store could not do its work: the database is
	// unreachable, read-only, full or persistently busy. See StorageError.
	ErrStorage = errors.New("jobs: storage error")
)

// KeyConflictError reports an idempotency key that is already bound to another
// intent. It matches ErrKeyConflict. JobID names the existing job, which is
// unchanged.
type KeyConflictError struct {
	Owner string
	Key   string
	JobID string
}

func (e *KeyConflictError) Error() string {
	return fmt.Sprintf("jobs: idempotency key %q is bound to job %s with a different request", e.Key, e.JobID)
}

// Is reports whether target is ErrKeyConflict.
func (e *KeyConflictError) Is(target error) bool { return target == ErrKeyConflict }

// AttemptInFlightError reports the attempt that blocks a new attempt or a
// FailJob. It matches ErrAttemptInFlight.
type AttemptInFlightError struct {
	JobID     string
	AttemptID string       // the blocking attempt
	State     AttemptState // its state when the request was refused
}

func (e *AttemptInFlightError) Error() string {
	return fmt.Sprintf("jobs: job %s: attempt %s is %s", e.JobID, e.AttemptID, e.State)
}

// Is reports whether target is ErrAttemptInFlight.
func (e *AttemptInFlightError) Is(target error) bool { return target == ErrAttemptInFlight }

// LostRaceError reports a completion that arrived after another attempt had
// won. It matches ErrLostRace. The late result was not stored anywhere.
type LostRaceError struct {
	JobID     string
	AttemptID string // the attempt whose result was dropped
	WinnerID  string // the attempt that completed the job
}

func (e *LostRaceError) Error() string {
	return fmt.Sprintf("jobs: job %s: attempt %s lost; attempt %s completed the job first", e.JobID, e.AttemptID, e.WinnerID)
}

// Is reports whether target is ErrLostRace.
func (e *LostRaceError) Is(target error) bool { return target == ErrLostRace }

// TransitionError reports an attempt whose state does not allow the requested
// change. It matches ErrInvalidTransition.
type TransitionError struct {
	AttemptID string
	From      AttemptState // the state the attempt is in
	To        AttemptState // the state that was asked for
	Detail    string       // optional, e.g. a conflicting provider reference
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("jobs: attempt %s cannot move from %s to %s", e.AttemptID, e.From, e.To)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Is reports whether target is ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// JobClosedError reports a job in a terminal state. It matches ErrJobClosed.
type JobClosedError struct {
	JobID string
	State JobState
}

func (e *JobClosedError) Error() string {
	return fmt.Sprintf("jobs: job %s is %s", e.JobID, e.State)
}

// Is reports whether target is ErrJobClosed.
func (e *JobClosedError) Is(target error) bool { return target == ErrJobClosed }

// InputError reports a rejected argument. It matches ErrInvalidInput.
type InputError struct {
	Field   string // e.g. "Key", "Params"
	Problem string // e.g. "longer than 255 bytes"
}

func (e *InputError) Error() string {
	return fmt.Sprintf("jobs: invalid %s: %s", e.Field, e.Problem)
}

// Is reports whether target is ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

func invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// StorageKind classifies a StorageError.
type StorageKind string

// Storage error kinds.
const (
	StorageBusy        StorageKind = "busy"        // locked by other writers for longer than allowed
	StorageFull        StorageKind = "full"        // disk or database size limit reached
	StorageReadOnly    StorageKind = "read-only"   // the database refuses writes
	StorageUnavailable StorageKind = "unavailable" // the database cannot be reached
	StorageSchema      StorageKind = "schema"      // the schema is missing, or newer than this library
	StorageOther       StorageKind = "other"

	// StorageConflict: the caller's transaction (see Manager.SubmitTx)
	// conflicted with a concurrent write, and no statement can succeed
	// inside it any more; roll it back and run it again.
	StorageConflict StorageKind = "conflict"
)

// StorageError reports a failure of the database itself. It matches ErrStorage.
// It never wraps a driver's error type, so callers depend on this package alone;
// Message keeps the driver's text for logs.
type StorageError struct {
	Op      string // the store operation, e.g. "create job"
	Kind    StorageKind
	Code    string // the database's own error code, if any (SQLSTATE; SQLite's extended result code, e.g. "517")
	Message string
	cause   error // only context errors are exposed through Unwrap
}

func (e *StorageError) Error() string {
	msg := "jobs: " + e.Op + ": " + string(e.Kind)
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is reports whether target is ErrStorage.
func (e *StorageError) Is(target error) bool { return target == ErrStorage }

// Unwrap returns context.Canceled or context.DeadlineExceeded when the
// operation was stopped by its context, and nil otherwise.
func (e *StorageError) Unwrap() error { return e.cause }

// NewStorageError returns the *StorageError of kind for the store
// operation op that failed with cause, for stores written outside this
// package: their own interpretation of their driver's errors ends here.
// Message keeps cause's text and code the database's own error code, if
// any. The driver's error itself is not kept: if cause is or wraps
// context.Canceled or context.DeadlineExceeded, Unwrap returns that
// context error (so that errors.Is(err, context.Canceled) holds, as for
// the stores of this package), and nil otherwise. A nil cause leaves
// Message empty.
func NewStorageError(kind StorageKind, op, code string, cause error) *StorageError {
	e := &StorageError{Op: op, Kind: kind, Code: code}
	if cause == nil {
		return e
	}
	e.Message = cause.Error()
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(cause, ctxErr) {
			e.cause = ctxErr
			break
		}
	}
	return e
}

// ErrClaimLost is what a Store write presenting a claim token
// returns when the attempt is no longer claimed with that token: another
// reconciler took it over once the claim's lease had run out. Nothing was
// written.
var ErrClaimLost = errors.New("jobs: the reconciler's claim on the attempt was taken over")
