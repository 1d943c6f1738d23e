package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Reconciler defaults; see Reconciler.
const (
	DefaultStaleAfter    = 5 * time.Minute
	DefaultRecheckAfter  = 10 * time.Second
	DefaultLookupTimeout = 30 * time.Second
	DefaultReconcileSize = 100
)

// StaleQuery is the input of ReconcileStore.StaleAttempts.
type StaleQuery struct {
	UnknownBefore time.Time // unknown attempts last updated before this
	OpenBefore    time.Time // starting and running attempts last updated before this
	Limit         int
}

// AttemptClaim is the input of ReconcileStore.ClaimAttempt.
type AttemptClaim struct {
	ID        string
	State     AttemptState // as read by StaleAttempts
	UpdatedAt time.Time    // as read by StaleAttempts
	At        time.Time    // the new UpdatedAt
}

// ReconcileStore is implemented by stores that can find attempts for a
// Reconciler. *SQLStore implements it on both dialects.
type ReconcileStore interface {
	// StaleAttempts returns up to q.Limit attempts that are unknown and
	// were last updated before q.UnknownBefore, or starting or running and
	// last updated before q.OpenBefore, least recently updated first.
	StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error)

	// ClaimAttempt sets the attempt's UpdatedAt to c.At if its state and
	// UpdatedAt are still c.State and c.UpdatedAt, and reports whether it
	// did. Of several reconcilers that read the same stale attempt, exactly
	// one claims it; the claim also postpones the next look at it.
	ClaimAttempt(ctx context.Context, c AttemptClaim) (bool, error)
}

// Reconciler is the out-of-band process that resolves attempts in doubt:
// unknown ones, and starting or running ones nobody has touched for
// StaleAfter (their worker crashed). It asks each attempt's provider what
// became of the request (Provider.Lookup: by the reference recorded at
// running, else by the idempotency key the attempt sent) and completes,
// fails or cancels the attempt according to the answer.
//
// Only evidence resolves an attempt in doubt: the provider's answer, or an
// operator's decision. The passing of time never does, since the provider
// may still act: an attempt whose provider keeps answering pending, or
// whose lookups fail, stays in doubt and is asked again. One whose provider
// cannot look it up (ErrLookupUnsupported) is reported for an operator, in
// ReconcileReport.NeedsOperator, a warning and an EventAttemptNeedsOperator
// event, until someone records its outcome with Complete, Fail or Cancel.
//
// Several reconcilers may run at once, in one process or many: each stale
// attempt is claimed by exactly one of them before its provider is asked,
// and the state-guarded transitions let only one resolution win in any case.
type Reconciler struct {
	Manager *Manager

	// Providers by name, as in Runner.
	Providers map[string]Provider

	// StaleAfter is how long a starting or running attempt may go without
	// a change before it is examined. Make it longer than the runners'
	// AttemptTimeout, so that attempts a live runner is still waiting for
	// are left to it. Defaults to DefaultStaleAfter.
	StaleAfter time.Duration

	// RecheckAfter is how long after its last change (or last examination)
	// an unknown attempt is examined. Defaults to DefaultRecheckAfter.
	RecheckAfter time.Duration

	// LookupTimeout bounds each Provider.Lookup. Defaults to
	// DefaultLookupTimeout.
	LookupTimeout time.Duration

	// BatchSize is how many attempts one pass examines at most. Defaults
	// to DefaultReconcileSize.
	BatchSize int

	// Clock paces Run. Ages are measured with the Manager's clock
	// (Options.Now), the one attempts are stamped with.
	Clock Clock

	// Logger defaults to the Manager's.
	Logger *slog.Logger
}

// Resolution is what a reconciler did with one attempt.
type Resolution struct {
	AttemptID string
	JobID     string
	Provider  string
	From      AttemptState // the state it was found in
	To        AttemptState // the state it was left in
	Reason    string
}

// ReconcileReport sums up one pass.
type ReconcileReport struct {
	Examined int          // stale attempts found
	Resolved []Resolution // moved to a terminal state by this pass
	Pending  int          // the provider is still working, or the grace period runs
	Claimed  int          // claimed first by another reconciler: left alone
	Settled  int          // resolved meanwhile by someone else
	// NeedsOperator lists attempts left in doubt because their provider
	// cannot look them up (ErrLookupUnsupported).
	NeedsOperator []Attempt
	Errors        []error // lookups or writes that failed; retried next pass
}

// ReconcileOnce examines up to BatchSize stale attempts once.
// Errors: errors.ErrUnsupported (the store does not implement
// ReconcileStore), ErrStorage. Problems with single attempts are in the
// report's Errors.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	m := r.Manager
	rs, ok := m.store.(ReconcileStore)
	if !ok {
		return rep, errUnsupported("ReconcileOnce")
	}
	stale := orDefault(r.StaleAfter, DefaultStaleAfter)
	recheck := orDefault(r.RecheckAfter, DefaultRecheckAfter)
	now := m.now()
	batch := r.BatchSize
	if batch <= 0 {
		batch = DefaultReconcileSize
	}
	list, err := rs.StaleAttempts(ctx, StaleQuery{UnknownBefore: now.Add(-recheck), OpenBefore: now.Add(-stale), Limit: batch})
	if err != nil {
		return rep, err
	}
	rep.Examined = len(list)
	for _, a := range list {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		claimed, err := rs.ClaimAttempt(ctx, AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt, At: now})
		if err != nil {
			rep.Errors = append(rep.Errors, err)
			continue
		}
		if !claimed {
			rep.Claimed++
			continue
		}
		r.resolve(ctx, a, &rep)
	}
	return rep, nil
}

// Run reconciles every interval until ctx ends, and returns ctx's error.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return invalid("every", "not positive")
	}
	clock := r.Clock
	if clock == nil {
		clock = SystemClock
	}
	for {
		rep, err := r.ReconcileOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger().ErrorContext(ctx, "jobs: reconcile pass failed", "error", err)
		}
		for _, e := range rep.Errors {
			r.logger().WarnContext(ctx, "jobs: reconcile", "error", e)
		}
		t := clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return r.Manager.logger
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// resolve asks a's provider what became of it and records the answer.
func (r *Reconciler) resolve(ctx context.Context, a Attempt, rep *ReconcileReport) {
	m := r.Manager
	p := r.Providers[a.Provider]
	if p == nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("jobs: reconcile attempt %s: no provider %q configured", a.ID, a.Provider))
		return
	}
	lctx, cancel := context.WithTimeout(ctx, orDefault(r.LookupTimeout, DefaultLookupTimeout))
	out, err := p.Lookup(lctx, a)
	cancel()
	switch {
	case errors.Is(err, ErrLookupUnsupported):
		r.needsOperator(ctx, a, err, rep)
		return
	case err != nil:
		rep.Errors = append(rep.Errors, fmt.Errorf("jobs: reconcile attempt %s: lookup of %s at %s: %w", a.ID, lookupKey(a), a.Provider, err))
		return
	}
	switch out.State {
	case OutcomePending:
		rep.Pending++
	case OutcomeSucceeded:
		_, err := m.Complete(ctx, a.ID, out.Result)
		var to AttemptState
		switch {
		case err == nil:
			to = AttemptSucceeded
		case errors.Is(err, ErrLostRace):
			to = AttemptLost
		case errors.Is(err, ErrContractViolation):
			to = AttemptFailed // Complete failed the attempt
		case errors.Is(err, ErrJobClosed):
			to = AttemptCancelled
		case errors.Is(err, ErrInvalidInput):
			// Not a result anything could use (empty, not JSON, too
			// large): the provider answered, and the answer is a failure.
			r.record(ctx, a, AttemptFailed, sanitizeReason("provider reported an unusable result: "+err.Error()), rep)
			return
		case errors.Is(err, ErrInvalidTransition):
			rep.Settled++
			return
		default:
			rep.Errors = append(rep.Errors, err)
			return
		}
		reason := "provider reported a result"
		if err != nil {
			reason += ": " + err.Error()
		}
		r.resolved(ctx, a, to, reason, rep)
	case OutcomeFailed:
		r.record(ctx, a, AttemptFailed, sanitizeReason("provider reported failure: "+out.Reason), rep)
	case OutcomeNotFound:
		r.record(ctx, a, AttemptCancelled, "provider never received the request and will not act on it", rep)
	default:
		rep.Errors = append(rep.Errors, fmt.Errorf("jobs: reconcile attempt %s: provider %s answered unknown outcome %q", a.ID, a.Provider, out.State))
	}
}

// lookupKey says how a's provider is asked about it.
func lookupKey(a Attempt) string {
	if a.ProviderRef != "" {
		return "reference " + a.ProviderRef
	}
	return "key " + a.ProviderKey()
}

// needsOperator reports a, which its provider cannot look up, for an
// operator to resolve; it stays in doubt meanwhile.
func (r *Reconciler) needsOperator(ctx context.Context, a Attempt, err error, rep *ReconcileReport) {
	rep.NeedsOperator = append(rep.NeedsOperator, a)
	r.logger().WarnContext(ctx, "jobs: attempt in doubt needs an operator: its provider cannot look it up; resolve it with Complete, Fail or Cancel",
		"job_id", a.JobID, "attempt_id", a.ID, "provider", a.Provider, "state", a.State, "provider_key", a.ProviderKey(), "error", err)
	r.Manager.emit(ctx, Event{Type: EventAttemptNeedsOperator, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider,
		Reason: "provider cannot look up " + lookupKey(a), Err: err})
}

// record moves a to a terminal state to (failed or cancelled).
func (r *Reconciler) record(ctx context.Context, a Attempt, to AttemptState, reason string, rep *ReconcileReport) {
	var err error
	if to == AttemptFailed {
		_, err = r.Manager.Fail(ctx, a.ID, reason)
	} else {
		_, err = r.Manager.Cancel(ctx, a.ID, reason)
	}
	switch {
	case err == nil:
		r.resolved(ctx, a, to, reason, rep)
	case errors.Is(err, ErrInvalidTransition):
		rep.Settled++
	default:
		rep.Errors = append(rep.Errors, err)
	}
}

func (r *Reconciler) resolved(ctx context.Context, a Attempt, to AttemptState, reason string, rep *ReconcileReport) {
	res := Resolution{AttemptID: a.ID, JobID: a.JobID, Provider: a.Provider, From: a.State, To: to, Reason: reason}
	rep.Resolved = append(rep.Resolved, res)
	r.logger().InfoContext(ctx, "jobs: attempt reconciled", "job_id", a.JobID, "attempt_id", a.ID,
		"provider", a.Provider, "from", a.State, "to", to, "reason", reason)
	r.Manager.emit(ctx, Event{Type: EventAttemptReconciled, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider,
		Reason: fmt.Sprintf("%s -> %s: %s", a.State, to, reason)})
}
