package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Kind is a typed view of one job kind: its params are a P, its results an
// R. It encodes params for Submit and results for Complete, and decodes
// them back from a Job, strictly: a result with a field R does not have, or
// anything after the JSON value, is an error, not silently dropped. Its
// Contract makes that strict decoding the contract of the kind, so that a
// provider whose output does not fit R never completes a job.
//
//	var Charge = jobs.NewKind[ChargeParams, ChargeResult]("charge")
//
//	m, err := jobs.New(store, jobs.Options{Contracts: map[string]jobs.Contract{
//		Charge.Name(): Charge.Contract("v1", nil),
//	}})
//	job, created, err := Charge.Submit(ctx, m, jobs.Request[ChargeParams]{
//		Owner: userID, Key: key, Provider: "stripe", Params: ChargeParams{Amount: 1200, Currency: "eur"},
//	})
//	…
//	receipt, err := Charge.Result(job) // a ChargeResult
//
// A Kind is a value; it is safe for concurrent use.
type Kind[P, R any] struct {
	name string
}

// NewKind returns the typed view of the kind called name.
func NewKind[P, R any](name string) Kind[P, R] { return Kind[P, R]{name: name} }

// Name returns the kind's name, the Job.Kind of its jobs.
func (k Kind[P, R]) Name() string { return k.name }

// Request is SubmitRequest with typed params; the kind is the Kind's.
type Request[P any] struct {
	Owner        string
	Key          string
	Provider     string
	Params       P
	IntentFields []string // as in SubmitRequest: the members of the encoded params that make up the intent
}

// Submit encodes req.Params as JSON and submits the intent with Manager.Submit.
// Errors: those of Submit, and ErrInvalidInput when the params cannot be
// encoded.
func (k Kind[P, R]) Submit(ctx context.Context, m *Manager, req Request[P]) (Job, bool, error) {
	params, err := json.Marshal(req.Params)
	if err != nil {
		return Job{}, false, invalid("Params", "cannot encode %T: %v", req.Params, err)
	}
	return m.Submit(ctx, SubmitRequest{Owner: req.Owner, Key: req.Key, Kind: k.name, Provider: req.Provider,
		Params: params, IntentFields: req.IntentFields})
}

// Complete encodes result as JSON and offers it with Manager.Complete.
// Errors: those of Complete, and ErrInvalidInput when the result cannot be
// encoded.
func (k Kind[P, R]) Complete(ctx context.Context, m *Manager, attemptID string, result R) (Job, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return Job{}, invalid("Result", "cannot encode %T: %v", result, err)
	}
	return m.Complete(ctx, attemptID, b)
}

// Params decodes the job's params. It refuses a job of another kind.
func (k Kind[P, R]) Params(j Job) (P, error) {
	var p P
	if err := k.check(j); err != nil {
		return p, err
	}
	return p, decodeStrict(j.Params, &p)
}

// Result decodes the result of a succeeded job, strictly. It refuses a job
// of another kind, and one that has no result: a job that is not succeeded
// (a *JobClosedError for a failed or cancelled one, an error naming the
// state otherwise).
func (k Kind[P, R]) Result(j Job) (R, error) {
	var r R
	if err := k.check(j); err != nil {
		return r, err
	}
	switch j.State {
	case JobSucceeded:
	case JobFailed, JobCancelled:
		return r, &JobClosedError{JobID: j.ID, State: j.State}
	default:
		return r, fmt.Errorf("jobs: job %s is %s: no result yet", j.ID, j.State)
	}
	return r, decodeStrict(j.Result, &r)
}

// Contract returns the contract of the kind at version: a result must
// decode strictly into an R (no unknown field, nothing after the value),
// and then pass validate, if validate is not nil.
func (k Kind[P, R]) Contract(version string, validate func(R) error) Contract {
	return Contract{Version: version, Validate: func(raw json.RawMessage) error {
		var r R
		if err := decodeStrict(raw, &r); err != nil {
			return err
		}
		if validate != nil {
			return validate(r)
		}
		return nil
	}}
}

func (k Kind[P, R]) check(j Job) error {
	if j.Kind != k.name {
		return fmt.Errorf("jobs: job %s is of kind %q, not %q", j.ID, j.Kind, k.name)
	}
	return nil
}

// decodeStrict decodes one JSON value into v, refusing fields v does not
// have and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("does not decode into %T: %w", v, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("does not decode into %T: data after the JSON value", v)
	}
	return nil
}
