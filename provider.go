package jobs

import (
	"context"
	"encoding/json"
	"errors"
)

// Provider is one backend that can fulfil jobs, as seen by a Runner and a
// Reconciler: an AI model behind an HTTP API, a payment processor, a
// printer. Implementations must honour ctx: when it ends, Call returns
// promptly.
type Provider interface {
	// Call sends the attempt's request for job and returns the result.
	// As soon as the provider has accepted the request, and before waiting
	// for the result, Call must pass the provider's reference for it to ack
	// (it records the attempt as running, so that it can be looked up later
	// and hedged). An error returned by ack is for information: keep going.
	//
	// Return an error made with Definitive when the provider definitively
	// refused or failed the request (it did not and will not do the work):
	// the attempt fails and the next provider may be tried. Any other error
	// leaves the outcome in doubt: the attempt becomes unknown.
	Call(ctx context.Context, job Job, attempt Attempt, ack func(ref string) error) (json.RawMessage, error)

	// Lookup asks the provider what became of the request with reference
	// ref. A reconciler uses it to resolve attempts in doubt.
	Lookup(ctx context.Context, ref string) (Outcome, error)
}

// OutcomeState is what a provider says became of a request.
type OutcomeState string

// Outcome states.
const (
	OutcomePending   OutcomeState = "pending"   // still working on it
	OutcomeSucceeded OutcomeState = "succeeded" // done; Outcome.Result holds the result
	OutcomeFailed    OutcomeState = "failed"    // definitively failed; Outcome.Reason says why
	OutcomeNotFound  OutcomeState = "not_found" // the provider has no such request
)

// Outcome is a provider's answer to Lookup.
type Outcome struct {
	State  OutcomeState
	Result json.RawMessage // for OutcomeSucceeded
	Reason string          // for OutcomeFailed
}

// DefinitiveError marks a provider error as definitive: the provider did
// not do the work and will not do it. Make one with Definitive.
type DefinitiveError struct{ Err error }

func (e *DefinitiveError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *DefinitiveError) Unwrap() error { return e.Err }

// Definitive marks err as a definitive refusal or failure of the provider.
// It returns nil for a nil err.
func Definitive(err error) error {
	if err == nil {
		return nil
	}
	return &DefinitiveError{Err: err}
}

// IsDefinitive reports whether err, or an error it wraps, was made with
// Definitive.
func IsDefinitive(err error) bool {
	var d *DefinitiveError
	return errors.As(err, &d)
}
