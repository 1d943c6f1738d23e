package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// verificationPrefix starts the IDs of verifications.
const verificationPrefix = "ver_"

// Verification is the recorded outcome of one round trip through a provider
// whose output was checked by the contract of a kind, at one contract version.
type Verification struct {
	ID              string    `json:"id"`
	Provider        string    `json:"provider"`
	Kind            string    `json:"kind"`
	ContractVersion string    `json:"contract_version"`
	Passed          bool      `json:"passed"`
	Reason          string    `json:"reason"` // why it failed; empty when it passed
	VerifiedAt      time.Time `json:"verified_at"`
	ExpiresAt       time.Time `json:"expires_at"` // zero: never expires
}

// Valid reports whether v passed and has not expired at t.
func (v Verification) Valid(t time.Time) bool {
	return v.Passed && (v.ExpiresAt.IsZero() || t.Before(v.ExpiresAt))
}

// ProviderUnverifiedError reports a failover attempt refused because the
// provider is not verified for the job's kind at the current contract
// version. It matches ErrProviderUnverified.
type ProviderUnverifiedError struct {
	JobID           string
	Provider        string
	Kind            string
	ContractVersion string
	Reason          string // e.g. "never verified …", "its verification expired at …", "its last verification failed: …"
}

func (e *ProviderUnverifiedError) Error() string {
	return fmt.Sprintf("jobs: job %s: provider %s is not verified for kind %q at contract %s: %s",
		e.JobID, e.Provider, e.Kind, e.ContractVersion, e.Reason)
}

// Is reports whether target is ErrProviderUnverified.
func (e *ProviderUnverifiedError) Is(target error) bool { return target == ErrProviderUnverified }

// VerifyOption configures VerifyProvider.
type VerifyOption func(*verifyOptions)

type verifyOptions struct {
	validFor time.Duration
}

// ValidFor makes a passing verification expire after d. Without it a
// verification is valid until the contract's version changes or a newer
// verification of the same provider fails.
func ValidFor(d time.Duration) VerifyOption {
	return func(o *verifyOptions) { o.validFor = d }
}

// VerifyProvider checks that provider can stand in for kind: it runs
// roundTrip (a real request with real inputs through that provider, supplied
// by the caller), checks the output with the kind's contract and records the
// outcome. A provider becomes eligible for failover attempts of the kind
// when its most recent verification at the current contract version passed
// and has not expired.
//
// A failed round trip or a failed check is a recorded outcome, not an error:
// VerifyProvider returns the Verification with Passed false and its Reason.
// If ctx ends during the round trip nothing is recorded and the context's
// error is returned.
//
// Errors: ErrInvalidInput (no contract for kind, bad names; nothing run),
// ErrStorage, errors.ErrUnsupported (the store is not a VerificationStore).
func (m *Manager) VerifyProvider(ctx context.Context, provider, kind string,
	roundTrip func(ctx context.Context) (json.RawMessage, error), opts ...VerifyOption) (Verification, error) {
	if err := ctx.Err(); err != nil {
		return Verification{}, err
	}
	if err := checkName("Provider", provider); err != nil {
		return Verification{}, err
	}
	if err := checkName("Kind", kind); err != nil {
		return Verification{}, err
	}
	c, ok := m.contracts[kind]
	if !ok {
		return Verification{}, invalid("Kind", "no contract registered for %q", kind)
	}
	if roundTrip == nil {
		return Verification{}, invalid("roundTrip", "nil")
	}
	var o verifyOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.validFor < 0 {
		return Verification{}, invalid("ValidFor", "negative")
	}
	out, err := roundTrip(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Verification{}, ctxErr
	}
	reason := ""
	switch {
	case err != nil:
		reason = "round trip failed: " + err.Error()
	default:
		if cerr := m.checkResult(out); cerr != nil {
			reason = cerr.Error()
		} else if verr := c.Validate(out); verr != nil {
			reason = "contract " + c.Version + " violated: " + verr.Error()
		}
	}
	now := m.now()
	v := Verification{
		ID:              newID(verificationPrefix, now),
		Provider:        provider,
		Kind:            kind,
		ContractVersion: c.Version,
		Passed:          reason == "",
		Reason:          SanitizeReason(reason),
		VerifiedAt:      now,
	}
	if v.Passed && o.validFor > 0 {
		v.ExpiresAt = now.Add(o.validFor)
	}
	start := time.Now()
	wctx, cancel := m.writeContext(ctx)
	defer cancel()
	vs, err := m.verificationStore()
	if err != nil {
		return Verification{}, err
	}
	if err := vs.RecordVerification(wctx, v); err != nil {
		return Verification{}, err
	}
	typ := EventProviderVerified
	if !v.Passed {
		typ = EventVerificationFailed
	}
	m.emit(ctx, Event{Type: typ, Kind: kind, Provider: provider, Reason: v.Reason, Duration: time.Since(start)})
	return v, nil
}

// Verifications lists recorded verifications, newest first.
// Errors: ErrInvalidInput, ErrStorage.
func (m *Manager) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, fld := range [...]struct{ name, value string }{
		{"Provider", f.Provider}, {"Kind", f.Kind}, {"ContractVersion", f.ContractVersion},
	} {
		if fld.value != "" {
			if err := checkName(fld.name, fld.value); err != nil {
				return nil, err
			}
		}
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	vs, err := m.verificationStore()
	if err != nil {
		return nil, err
	}
	return vs.Verifications(ctx, f)
}

// verificationStore returns the store as a VerificationStore, or an error
// matching errors.ErrUnsupported.
func (m *Manager) verificationStore() (VerificationStore, error) {
	vs, ok := m.store.(VerificationStore)
	if !ok {
		return nil, fmt.Errorf("jobs: a %T records no provider verifications: %w", m.store, errors.ErrUnsupported)
	}
	return vs, nil
}

// CheckFailover reports whether an attempt of job on provider may start as
// far as verification goes: nil for the job's own provider, for a kind
// without a contract, and for a provider whose latest verification at the
// current contract version passed and has not expired; otherwise a
// *ProviderUnverifiedError. StartAttempt runs the same check. A provider
// name that StartAttempt would refuse is an *InputError.
func (m *Manager) CheckFailover(ctx context.Context, job Job, provider string) error {
	if provider == "" || provider == job.Provider {
		return nil
	}
	if err := checkName("Provider", provider); err != nil {
		return err
	}
	c, ok := m.contracts[job.Kind]
	if !ok {
		return nil
	}
	unverified := func(reason string) error {
		return &ProviderUnverifiedError{JobID: job.ID, Provider: provider, Kind: job.Kind, ContractVersion: c.Version, Reason: reason}
	}
	vs, ok := m.store.(VerificationStore)
	if !ok {
		return unverified("the store records no verifications")
	}
	latest, err := vs.Verifications(ctx, VerificationFilter{Provider: provider, Kind: job.Kind, ContractVersion: c.Version, Limit: 1})
	if err != nil {
		return err
	}
	if len(latest) == 0 {
		return unverified("never verified at this contract version")
	}
	switch v := latest[0]; {
	case !v.Passed:
		return unverified("its last verification failed: " + v.Reason)
	case !v.Valid(m.now()):
		return unverified("its verification expired at " + v.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}

// checkFailover is StartAttempt's hook: it reads the job only when some
// contract is registered and another provider than the target may be asked.
func (m *Manager) checkFailover(ctx context.Context, jobID, provider string) error {
	if provider == "" || len(m.contracts) == 0 {
		return nil
	}
	j, err := m.store.Job(ctx, jobID)
	if err != nil {
		return err
	}
	if j.State.Terminal() {
		return nil // the store refuses it with ErrJobClosed
	}
	return m.CheckFailover(ctx, j, provider)
}
