package history

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentjobs/jobs"
)

// Method names a method of jobs.Store or of one of its capabilities.
type Method string

// The methods a recorded store records.
const (
	CreateJob          Method = "CreateJob"
	CreateJobTx        Method = "CreateJobTx"
	ReplaceJob         Method = "ReplaceJob"
	Job                Method = "Job"
	JobByKey           Method = "JobByKey"
	CloseJob           Method = "CloseJob"
	Attempt            Method = "Attempt"
	Attempts           Method = "Attempts"
	CreateAttempt      Method = "CreateAttempt"
	UpdateAttempt      Method = "UpdateAttempt"
	CompleteAttempt    Method = "CompleteAttempt"
	ListJobs           Method = "ListJobs"
	StaleAttempts      Method = "StaleAttempts"
	ClaimAttempt       Method = "ClaimAttempt"
	RenewClaim         Method = "RenewClaim"
	RecordVerification Method = "RecordVerification"
	Verifications      Method = "Verifications"
	PurgeJobs          Method = "PurgeJobs"
	NotifyClosed       Method = "NotifyClosed"
	RecordLookup       Method = "RecordLookup"
	ReconcileStates    Method = "ReconcileStates"
	CountJobs          Method = "CountJobs"
	ListAttempts       Method = "ListAttempts"
)

// Args are a call's arguments, by name; only those of the method called
// are set. The context, and CreateJobTx's transaction, are not recorded.
type Args struct {
	Job                *jobs.Job                `json:"job,omitempty"`                 // CreateJob, CreateJobTx
	Replacement        *jobs.JobReplacement     `json:"replacement,omitempty"`         // ReplaceJob
	ID                 string                   `json:"id,omitempty"`                  // Job, Attempt
	AttemptIDs         []string                 `json:"attempt_ids,omitempty"`         // ReconcileStates
	JobID              string                   `json:"job_id,omitempty"`              // Attempts, NotifyClosed
	Owner              string                   `json:"owner,omitempty"`               // JobByKey
	Key                string                   `json:"key,omitempty"`                 // JobByKey
	Close              *jobs.JobClose           `json:"close,omitempty"`               // CloseJob
	NewAttempt         *jobs.NewAttempt         `json:"new_attempt,omitempty"`         // CreateAttempt
	Update             *jobs.AttemptUpdate      `json:"update,omitempty"`              // UpdateAttempt
	Completion         *jobs.Completion         `json:"completion,omitempty"`          // CompleteAttempt
	Claim              *jobs.AttemptClaim       `json:"claim,omitempty"`               // ClaimAttempt, RenewClaim
	JobQuery           *jobs.JobQuery           `json:"job_query,omitempty"`           // ListJobs, CountJobs
	AttemptQuery       *jobs.AttemptQuery       `json:"attempt_query,omitempty"`       // ListAttempts
	Lookup             *jobs.AttemptLookup      `json:"lookup,omitempty"`              // RecordLookup
	StaleQuery         *jobs.StaleQuery         `json:"stale_query,omitempty"`         // StaleAttempts
	PurgeQuery         *jobs.PurgeQuery         `json:"purge_query,omitempty"`         // PurgeJobs
	Verification       *jobs.Verification       `json:"verification,omitempty"`        // RecordVerification
	VerificationFilter *jobs.VerificationFilter `json:"verification_filter,omitempty"` // Verifications
}

// Results are what a call returned beside its error; only those of the
// method called are set, and a zero value is left unset (nil).
type Results struct {
	Job           *jobs.Job           `json:"job,omitempty"`           // CreateJob, CreateJobTx, ReplaceJob, Job, JobByKey, CloseJob, CompleteAttempt
	Created       bool                `json:"created,omitempty"`       // CreateJob, CreateJobTx, ReplaceJob
	Attempt       *jobs.Attempt       `json:"attempt,omitempty"`       // Attempt, CreateAttempt, UpdateAttempt, CompleteAttempt, ClaimAttempt
	Attempts      []jobs.Attempt      `json:"attempts,omitempty"`      // Attempts, StaleAttempts, ListAttempts
	Jobs          []jobs.Job          `json:"jobs,omitempty"`          // ListJobs
	Claimed       bool                `json:"claimed,omitempty"`       // ClaimAttempt, RenewClaim
	Purged        *jobs.PurgeCount    `json:"purged,omitempty"`        // PurgeJobs
	Verifications []jobs.Verification `json:"verifications,omitempty"` // Verifications
	Count         int64               `json:"count,omitempty"`         // CountJobs
	// ReconcileStates is ReconcileStates' answer.
	ReconcileStates []jobs.ReconcileState `json:"reconcile_states,omitempty"`
}

// Outcome classifies an answer: see Classify.
type Outcome string

// Outcomes.
const (
	OK        Outcome = "ok"        // no error: the results are definite
	Refused   Outcome = "refused"   // a definite typed answer of the contract
	Ambiguous Outcome = "ambiguous" // the write may or may not have happened
)

// refusals are the sentinels of definite answers, with their names.
var refusals = []struct {
	err  error
	name string
}{
	{jobs.ErrNotFound, "ErrNotFound"},
	{jobs.ErrKeyConflict, "ErrKeyConflict"},
	{jobs.ErrAttemptInFlight, "ErrAttemptInFlight"},
	{jobs.ErrJobClosed, "ErrJobClosed"},
	{jobs.ErrInvalidTransition, "ErrInvalidTransition"},
	{jobs.ErrLostRace, "ErrLostRace"},
	{jobs.ErrClaimLost, "ErrClaimLost"},
	{jobs.ErrInvalidInput, "ErrInvalidInput"},
}

// others are the sentinels of ambiguous answers that are worth naming.
var others = []struct {
	err  error
	name string
}{
	{jobs.ErrStorage, "ErrStorage"},
	{context.Canceled, "context.Canceled"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
	{errors.ErrUnsupported, "errors.ErrUnsupported"},
}

// Classify returns the outcome of an answer with error err: OK for nil;
// Ambiguous for an error matching jobs.ErrStorage, context.Canceled or
// context.DeadlineExceeded, whatever else it matches; Refused for one
// matching ErrNotFound, ErrKeyConflict, ErrAttemptInFlight, ErrJobClosed,
// ErrInvalidTransition, ErrLostRace, ErrClaimLost or ErrInvalidInput; and
// Ambiguous for anything else.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, jobs.ErrStorage), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Ambiguous
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return Refused
		}
	}
	return Ambiguous
}

// Error is a recorded error: its text, the sentinel it matches, and the
// details of the typed error it carries, if any.
type Error struct {
	Message string `json:"message"`
	// Sentinel names what the error matches with errors.Is: "ErrNotFound"
	// and the other refusals, or "ErrStorage", "context.Canceled",
	// "context.DeadlineExceeded", "errors.ErrUnsupported"; empty for an
	// error matching none.
	Sentinel string `json:"sentinel,omitempty"`

	KeyConflict *jobs.KeyConflictError     `json:"key_conflict,omitempty"`
	InFlight    *jobs.AttemptInFlightError `json:"in_flight,omitempty"`
	JobClosed   *jobs.JobClosedError       `json:"job_closed,omitempty"`
	Transition  *jobs.TransitionError      `json:"transition,omitempty"`
	LostRace    *jobs.LostRaceError        `json:"lost_race,omitempty"`
	Input       *jobs.InputError           `json:"input,omitempty"`
	Storage     *jobs.StorageError         `json:"storage,omitempty"`
}

// errorOf records err, or returns nil for a nil err.
func errorOf(err error) *Error {
	if err == nil {
		return nil
	}
	e := &Error{Message: err.Error()}
	switch Classify(err) {
	case Refused:
		for _, r := range refusals {
			if errors.Is(err, r.err) {
				e.Sentinel = r.name
				break
			}
		}
	default:
		for _, o := range others {
			if errors.Is(err, o.err) {
				e.Sentinel = o.name
				break
			}
		}
	}
	e.KeyConflict = as[jobs.KeyConflictError](err)
	e.InFlight = as[jobs.AttemptInFlightError](err)
	e.JobClosed = as[jobs.JobClosedError](err)
	e.Transition = as[jobs.TransitionError](err)
	e.LostRace = as[jobs.LostRaceError](err)
	e.Input = as[jobs.InputError](err)
	e.Storage = as[jobs.StorageError](err)
	return e
}

// as returns a copy of the *T in err's chain, or nil.
func as[T any, PT interface {
	*T
	error
}](err error) *T {
	var target PT
	if !errors.As(err, &target) {
		return nil
	}
	c := *(*T)(target)
	return &c
}

// Err rebuilds an error from the record that matches, with errors.Is and
// errors.As, what the recorded one matched: its typed error where one was
// recorded, else its sentinel wrapped with the recorded text. An unknown
// sentinel gives an error matching nothing.
func (e *Error) Err() error {
	switch {
	case e == nil:
		return nil
	case e.KeyConflict != nil:
		return e.KeyConflict
	case e.InFlight != nil:
		return e.InFlight
	case e.JobClosed != nil:
		return e.JobClosed
	case e.Transition != nil:
		return e.Transition
	case e.LostRace != nil:
		return e.LostRace
	case e.Input != nil:
		return e.Input
	case e.Storage != nil:
		return e.Storage
	}
	for _, list := range [][]struct {
		err  error
		name string
	}{refusals, others} {
		for _, r := range list {
			if r.name == e.Sentinel {
				return fmt.Errorf("%s: %w", e.Message, r.err)
			}
		}
	}
	return errors.New(e.Message)
}

// Op is one recorded call.
type Op struct {
	Process string // the Sink's process: host, PID and a nonce
	Client  string // the actor that Record named
	Seq     int64  // the call's number in its process's file
	Method  Method

	Args Args
	// ArgsError says why the arguments could not be recorded (Args is
	// then zero); empty otherwise.
	ArgsError string

	Call     int64 // Unix nanoseconds, before the store was called
	Returned bool  // false if the call has no return line: its process died first
	Return   int64 // Unix nanoseconds, after the store answered; 0 if !Returned

	Outcome Outcome // Ambiguous when !Returned
	Results Results
	Error   *Error
}

// History is a run's operations, from every file of its directory.
type History struct {
	Dir       string
	Processes []string // the processes that recorded it, in the order of their files' names
	Ops       []Op     // by Call time, then Process and Seq
}
