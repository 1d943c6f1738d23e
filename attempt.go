package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// AttemptState is the state of an attempt. See the package documentation for
// the state machine.
type AttemptState string

// Attempt states.
const (
	AttemptStarting  AttemptState = "starting"  // recorded before the provider is called
	AttemptRunning   AttemptState = "running"   // the provider acknowledged; ProviderRef is set
	AttemptUnknown   AttemptState = "unknown"   // timed out: the provider may still be working
	AttemptSucceeded AttemptState = "succeeded" // won the compare-and-swap; its result is the job's
	AttemptLost      AttemptState = "lost"      // finished after another attempt had won; result dropped
	AttemptFailed    AttemptState = "failed"    // the provider said no, or the result broke the contract
	AttemptCancelled AttemptState = "cancelled" // stopped out of band, or finished after the job was closed
)

// Terminal reports whether s is final: succeeded, lost, failed or cancelled.
func (s AttemptState) Terminal() bool {
	switch s {
	case AttemptSucceeded, AttemptLost, AttemptFailed, AttemptCancelled:
		return true
	}
	return false
}

// InDoubt reports whether s is starting or unknown: the provider may or may
// not have the request. No new attempt starts while one is in doubt.
func (s AttemptState) InDoubt() bool { return s == AttemptStarting || s == AttemptUnknown }

// Open reports whether s is starting, running or unknown.
func (s AttemptState) Open() bool {
	return s == AttemptStarting || s == AttemptRunning || s == AttemptUnknown
}

// Valid reports whether s is one of the attempt states.
func (s AttemptState) Valid() bool { return s.Open() || s.Terminal() }

// attemptSources lists, for each target state, the states it can be reached
// from. It is the whole attempt state machine.
var attemptSources = map[AttemptState][]AttemptState{
	AttemptRunning:   {AttemptStarting},
	AttemptUnknown:   {AttemptStarting, AttemptRunning},
	AttemptSucceeded: {AttemptStarting, AttemptRunning, AttemptUnknown},
	AttemptLost:      {AttemptStarting, AttemptRunning, AttemptUnknown},
	AttemptFailed:    {AttemptStarting, AttemptRunning, AttemptUnknown},
	AttemptCancelled: {AttemptStarting, AttemptRunning, AttemptUnknown},
}

// CanMoveTo reports whether the attempt state machine has an edge from s to t.
func (s AttemptState) CanMoveTo(t AttemptState) bool {
	return slices.Contains(attemptSources[t], s)
}

// Attempt is one try at fulfilling a job, against one provider.
type Attempt struct {
	ID          string       `json:"id"`
	JobID       string       `json:"job_id"`
	Seq         int          `json:"seq"` // 1 for the job's first attempt, 2 for the next, …
	Provider    string       `json:"provider"`
	State       AttemptState `json:"state"`
	BaseVersion int64        `json:"base_version"` // the job version read when the attempt started
	Hedge       bool         `json:"hedge"`        // started while another attempt was running
	ProviderRef string       `json:"provider_ref"` // the provider's reference, recorded by MarkRunning; never changes once set
	Reason      string       `json:"reason"`       // why it became unknown, failed, lost or cancelled

	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at"` // zero until terminal
}

// ProviderKey returns the idempotency key of the attempt's request at its
// provider: the attempt's ID. Whoever calls the provider sends it with the
// request (as package failover's Provider.Call does), and a reconciler
// finds the request by it when no reference was recorded. Each attempt has
// its own key, so that a retry or a failover (a new attempt) is a new
// request, while a resent request of one attempt is not.
func (a Attempt) ProviderKey() string { return a.ID }

// AttemptOption configures StartAttempt.
type AttemptOption func(*attemptOptions)

type attemptOptions struct {
	hedge bool
}

// Hedge allows the new attempt to start while another attempt of the job is
// running (for example a fallback after a long silence). It never allows an
// attempt past one that is starting or unknown. Options.Hedging sets it for
// every call.
func Hedge() AttemptOption { return func(o *attemptOptions) { o.hedge = true } }

// StartAttempt records a new attempt of the job against provider, in state
// starting, before the provider is called. An empty provider means the job's
// target provider. The attempt remembers the job's version: that is what its
// Complete compares against.
//
// The store refuses the attempt atomically, also against concurrent calls:
// while any attempt of the job is starting or unknown (ErrAttemptInFlight,
// naming it); while one is running, unless hedging was asked for; and when the
// job is terminal (ErrJobClosed).
//
// An attempt on a provider other than the job's target is a failover
// attempt: when the job's kind has a contract, it is refused with a
// *ProviderUnverifiedError unless the provider's latest verification at the
// current contract version passed and has not expired (see VerifyProvider
// and CheckFailover). That check reads the job first; it is skipped when no
// contract is registered or provider is empty.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrAttemptInFlight, ErrJobClosed,
// ErrProviderUnverified, ErrStorage.
func (m *Manager) StartAttempt(ctx context.Context, jobID, provider string, opts ...AttemptOption) (Attempt, error) {
	if err := m.checkID(ctx, "job ID", jobID); err != nil {
		return Attempt{}, err
	}
	if provider != "" {
		if err := checkName("Provider", provider); err != nil {
			return Attempt{}, err
		}
	}
	o := attemptOptions{hedge: m.opts.Hedging}
	for _, opt := range opts {
		opt(&o)
	}
	if err := m.checkFailover(ctx, jobID, provider); err != nil {
		if errors.Is(err, ErrProviderUnverified) {
			m.emit(ctx, Event{Type: EventAttemptRefused, JobID: jobID, Provider: provider, Err: err})
		}
		return Attempt{}, err
	}
	now := m.now()
	start := time.Now()
	a, err := m.store.CreateAttempt(ctx, NewAttempt{
		ID:       newID(attemptPrefix, now),
		JobID:    jobID,
		Provider: provider,
		Hedge:    o.hedge,
		At:       now,
	})
	if err != nil {
		if errors.Is(err, ErrAttemptInFlight) || errors.Is(err, ErrJobClosed) {
			m.emit(ctx, Event{Type: EventAttemptRefused, JobID: jobID, Provider: provider, Err: err, Duration: time.Since(start)})
		}
		return Attempt{}, err
	}
	m.emit(ctx, Event{Type: EventAttemptStarted, JobID: jobID, AttemptID: a.ID, Provider: a.Provider, Duration: time.Since(start)})
	return a, nil
}

// MarkRunning records that the provider acknowledged the attempt, with its
// reference for the request (what a Reconciler asks the provider about).
//
// A starting attempt becomes running. An unknown attempt stays unknown (it
// is still in doubt, and blocks new attempts until a terminal state is
// recorded) and learns its reference, so that an acknowledgement that
// arrives after the timeout is not lost and a reconciler can look the
// request up by it; that emits EventReferenceRecorded instead of
// EventAttemptRunning.
//
// A recorded reference never changes. Repeating the call with the same
// reference is not an error and writes nothing; another reference than the
// one recorded is refused with a *TransitionError whose Detail says so, and
// writes nothing.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrInvalidTransition, ErrStorage.
func (m *Manager) MarkRunning(ctx context.Context, attemptID, providerRef string) (Attempt, error) {
	if providerRef == "" {
		return Attempt{}, invalid("ProviderRef", "empty")
	}
	if err := checkText("ProviderRef", providerRef); err != nil {
		return Attempt{}, err
	}
	a, err := m.transition(ctx, attemptID, attemptSources[AttemptRunning], AttemptRunning, providerRef, "", EventAttemptRunning)
	var te *TransitionError
	if !errors.As(err, &te) || te.From != AttemptUnknown {
		return a, err
	}
	// The acknowledgement came after the attempt was marked unknown: record
	// the reference only, on an attempt that has none yet.
	a, err = m.transition(ctx, attemptID, []AttemptState{AttemptUnknown}, AttemptUnknown, providerRef, "", EventReferenceRecorded)
	if errors.As(err, &te) {
		te.To = AttemptRunning // what the caller asked for
	}
	return a, err
}

// MarkUnknown records that the attempt timed out, or that its outcome is
// otherwise in doubt: the provider may still be working. The attempt blocks
// new attempts until a terminal state is recorded for it (Complete, Fail or
// Cancel), typically by a reconciler that asks the provider. A timeout is
// never a failure.
//
// At most one attempt of a job is in doubt at a time: if a hedge of this
// attempt is still starting, MarkUnknown is refused with ErrAttemptInFlight
// naming it; record the hedge's acknowledgement or failure, then try again.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrInvalidTransition,
// ErrAttemptInFlight, ErrStorage.
func (m *Manager) MarkUnknown(ctx context.Context, attemptID, reason string) (Attempt, error) {
	return m.transition(ctx, attemptID, attemptSources[AttemptUnknown], AttemptUnknown, "", reason, EventAttemptUnknown)
}

// Fail records that the provider definitively refused or failed the attempt.
// The job stays open for another attempt.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrInvalidTransition, ErrStorage.
func (m *Manager) Fail(ctx context.Context, attemptID, reason string) (Attempt, error) {
	return m.transition(ctx, attemptID, attemptSources[AttemptFailed], AttemptFailed, "", reason, EventAttemptFailed)
}

// Cancel stops the attempt out of band, for example when it is known never to
// have reached the provider. It unblocks the job.
//
// Errors: ErrInvalidInput, ErrNotFound, ErrInvalidTransition, ErrStorage.
func (m *Manager) Cancel(ctx context.Context, attemptID, reason string) (Attempt, error) {
	return m.transition(ctx, attemptID, attemptSources[AttemptCancelled], AttemptCancelled, "", reason, EventAttemptCancelled)
}

// transition moves the attempt from one of the states from to the state
// to, recording ref and reason when not empty, and emits typ.
func (m *Manager) transition(ctx context.Context, attemptID string, from []AttemptState, to AttemptState, ref, reason string, typ EventType) (Attempt, error) {
	if err := m.checkID(ctx, "attempt ID", attemptID); err != nil {
		return Attempt{}, err
	}
	if err := checkText("Reason", reason); err != nil {
		return Attempt{}, err
	}
	if strings.HasPrefix(reason, reasonDroppedPrefix) {
		// Reserved for the store's record of a dropped result, which keeps
		// a job's key (Attempt.ResultDropped).
		return Attempt{}, invalid("Reason", "%q is reserved for results dropped by Complete", reasonDroppedPrefix)
	}
	start := time.Now()
	wctx, cancel := m.writeContext(ctx)
	defer cancel()
	a, err := m.store.UpdateAttempt(wctx, AttemptUpdate{
		ID:          attemptID,
		From:        from,
		To:          to,
		ProviderRef: ref,
		Reason:      reason,
		At:          m.now(),
	})
	if errors.Is(err, ErrInvalidTransition) && a.State == to && (ref == "" || a.ProviderRef == ref) {
		// Already there: a retried call after an ambiguous failure.
		return a, nil
	}
	if err != nil {
		var te *TransitionError
		if errors.As(err, &te) && ref != "" && a.State == to && a.ProviderRef != "" {
			te.Detail = "another provider reference is already recorded"
		}
		return Attempt{}, err
	}
	m.emit(ctx, Event{Type: typ, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider, Reason: reason, Duration: time.Since(start)})
	return a, nil
}

// Attempt returns the attempt with the given ID. Errors: ErrNotFound, ErrStorage.
func (m *Manager) Attempt(ctx context.Context, attemptID string) (Attempt, error) {
	if err := m.checkID(ctx, "attempt ID", attemptID); err != nil {
		return Attempt{}, err
	}
	return m.store.Attempt(ctx, attemptID)
}

// Attempts returns the job's attempts, oldest first.
// Errors: ErrNotFound (no such job), ErrStorage.
func (m *Manager) Attempts(ctx context.Context, jobID string) ([]Attempt, error) {
	if err := m.checkID(ctx, "job ID", jobID); err != nil {
		return nil, err
	}
	return m.store.Attempts(ctx, jobID)
}
