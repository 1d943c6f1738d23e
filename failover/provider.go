package failover

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/intentjobs/jobs"
)

// Provider is one backend that can fulfil jobs, as seen by a Runner and a
// Reconciler: an AI model behind an HTTP API, a payment processor, a
// printer. Implementations must honour ctx: when it ends, Call returns
// promptly.
type Provider interface {
	// Call sends the attempt's request for job and returns the result.
	//
	// The request must carry attempt.ProviderKey() as its idempotency key at
	// the provider (an Idempotency-Key header, a client request ID, …): it
	// is how Lookup finds the request when its acknowledgement never
	// arrived, and how the provider knows a resent request for the work it
	// already has.
	//
	// As soon as the provider has accepted the request, and before waiting
	// for the result, Call must pass the provider's reference for it to ack
	// (it records the attempt as running, so that it can be looked up later
	// and hedged). An error returned by ack is for information: keep going.
	//
	// Return an error made with Definitive when the provider definitively
	// refused or failed the request (it did not and will not do the work):
	// the attempt fails and the next provider may be tried. Any other error
	// leaves the outcome in doubt: the attempt becomes unknown.
	Call(ctx context.Context, job jobs.Job, attempt jobs.Attempt, ack func(ref string) error) (json.RawMessage, error)

	// Lookup asks the provider what became of the attempt's request: by
	// attempt.ProviderRef when one was recorded, else by
	// attempt.ProviderKey(), the idempotency key Call sent. A Reconciler uses
	// it to resolve attempts in doubt, and only its answers (or an
	// operator's) resolve them.
	//
	// Answer OutcomeNotFound only when the provider will never act on that
	// request: it never arrived and cannot arrive any more (for example,
	// the provider fences the key, so that a late request with it is
	// refused). A request that may still arrive, or may still be worked on,
	// is OutcomePending. The attempt is cancelled on OutcomeNotFound.
	//
	// A provider that cannot answer, for example one that can look requests
	// up by its reference but not by the idempotency key, returns an error
	// matching ErrLookupUnsupported: the attempt stays in doubt, and the
	// Reconciler reports it as needing an operator. Any other error is
	// taken as a failed lookup, asked again later.
	Lookup(ctx context.Context, attempt jobs.Attempt) (Outcome, error)
}

// ErrLookupUnsupported is what Provider.Lookup returns (or wraps) when the
// provider cannot say what became of a request, typically because it has
// no reference for it and cannot search by idempotency key. The attempt
// stays in doubt until an operator resolves it (the Manager's Complete, Fail
// or Cancel).
var ErrLookupUnsupported = errors.New("failover: provider cannot look up this request")

// OutcomeState is what a provider says became of a request.
type OutcomeState string

// Outcome states.
const (
	OutcomePending   OutcomeState = "pending"   // still working on it
	OutcomeSucceeded OutcomeState = "succeeded" // done; Outcome.Result holds the result
	OutcomeFailed    OutcomeState = "failed"    // definitively failed; Outcome.Reason says why
	OutcomeNotFound  OutcomeState = "not_found" // the provider has no such request and will never act on it
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

// Error returns the wrapped error's message.
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
