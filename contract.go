package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Contract is what the business logic needs from a result of one job kind:
// not only valid JSON, but JSON it can interpret (the fields it reads, their
// types and ranges, nothing empty that must not be). Register contracts with
// Options.Contracts.
//
// Version names the contract's current form. Changing what Validate accepts
// means a new Version: verifications of providers recorded under an older
// version no longer make them eligible for failover.
type Contract struct {
	Version  string
	Validate func(result json.RawMessage) error
}

// ContractViolationError reports a result that failed its kind's contract.
// It matches ErrContractViolation. The attempt was marked failed with Reason;
// the result reached neither the job nor the attempt.
type ContractViolationError struct {
	JobID           string
	AttemptID       string
	Kind            string
	Provider        string
	ContractVersion string
	Reason          string // what Validate said
}

func (e *ContractViolationError) Error() string {
	return fmt.Sprintf("jobs: attempt %s (provider %s): result violates contract %s of kind %q: %s",
		e.AttemptID, e.Provider, e.ContractVersion, e.Kind, e.Reason)
}

// Is reports whether target is ErrContractViolation.
func (e *ContractViolationError) Is(target error) bool { return target == ErrContractViolation }

// Contract returns the contract registered for kind, if any.
func (m *Manager) Contract(kind string) (Contract, bool) {
	c, ok := m.contracts[kind]
	return c, ok
}

func copyContracts(in map[string]Contract) (map[string]Contract, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]Contract, len(in))
	for kind, c := range in {
		field := fmt.Sprintf("Contracts[%q]", kind)
		if err := checkName(field, kind); err != nil {
			return nil, err
		}
		if c.Validate == nil {
			return nil, invalid(field+".Validate", "nil")
		}
		if err := checkName(field+".Version", c.Version); err != nil {
			return nil, err
		}
		out[kind] = c
	}
	return out, nil
}

// checkContract validates result against the contract of the attempt's kind.
// A violation fails the attempt (when it is still open) and is returned as a
// *ContractViolationError; nothing else is written. With a reconciler's
// claimToken, the attempt is failed only under that claim, and an attempt
// that someone else resolved meanwhile is reported as such (see complete).
func (m *Manager) checkContract(ctx context.Context, attemptID string, result json.RawMessage, claimToken string) error {
	a, err := m.store.Attempt(ctx, attemptID)
	if err != nil {
		return err
	}
	j, err := m.store.Job(ctx, a.JobID)
	if err != nil {
		return err
	}
	kind := j.Kind
	c, ok := m.contracts[kind]
	if !ok {
		return nil
	}
	verr := c.Validate(result)
	if verr == nil {
		return nil
	}
	reason := SanitizeReason(verr.Error())
	cv := &ContractViolationError{JobID: a.JobID, AttemptID: a.ID, Kind: kind, Provider: a.Provider,
		ContractVersion: c.Version, Reason: reason}
	start := time.Now()
	wctx, cancel := m.writeContext(ctx)
	defer cancel()
	_, err = m.store.UpdateAttempt(wctx, AttemptUpdate{
		ID:         a.ID,
		From:       attemptSources[AttemptFailed],
		To:         AttemptFailed,
		Reason:     SanitizeReason("contract " + c.Version + " violated: " + reason),
		At:         m.now(),
		ClaimToken: claimToken,
	})
	if err != nil && (claimToken != "" || !errors.Is(err, ErrInvalidTransition)) {
		// The attempt could not be marked failed: report that, not the
		// violation, so that the caller knows the attempt is still open,
		// or that a reconciler's claim on it was taken over or that it
		// was resolved while the reconciler asked.
		return err
	}
	// An attempt that was already terminal (a retried call) is unchanged;
	// the result is refused all the same.
	m.logger.WarnContext(ctx, "jobs: result violates contract",
		"job_id", a.JobID, "attempt_id", a.ID, "provider", a.Provider, "kind", kind,
		"contract_version", c.Version, "reason", reason)
	m.emit(ctx, Event{Type: EventContractViolation, JobID: a.JobID, AttemptID: a.ID, Kind: kind, Provider: a.Provider,
		Reason: reason, Err: cv, Duration: time.Since(start)})
	return cv
}

// SanitizeReason makes s storable as a reason, whatever text it comes from,
// such as a provider's error message: invalid UTF-8 becomes U+FFFD, NUL
// bytes are removed, and text beyond the limit of a stored reason (4096
// bytes) is cut on a rune boundary and ends with "…". Fail, Cancel and
// MarkUnknown accept what it returns, unless it begins with "result
// dropped:", which is reserved for the results Complete drops.
func SanitizeReason(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= maxTextBytes {
		return s
	}
	const ellipsis = "…"
	cut := maxTextBytes - len(ellipsis)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + ellipsis
}
