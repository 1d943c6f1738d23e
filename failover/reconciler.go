package failover

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/intentjobs/jobs"
)

// Reconciler defaults; see Reconciler.
const (
	DefaultStaleAfter    = 5 * time.Minute
	DefaultRecheckAfter  = 10 * time.Second
	DefaultLookupTimeout = 30 * time.Second
	DefaultReconcileSize = 100
)

// Reconciler is the out-of-band process that resolves attempts in doubt:
// unknown ones, and starting or running ones nobody has touched for
// StaleAfter (their worker crashed). It asks each attempt's provider what
// became of the request (Provider.Lookup: by the reference recorded at
// running, else by the idempotency key the attempt sent) and completes,
// fails or cancels the attempt according to the answer.
//
// Only evidence resolves an attempt in doubt: the provider's answer, or an
// operator's decision. The passing of time never does, since the provider
// may still act: an attempt whose provider answers pending, or whose lookup
// fails, stays in doubt and is asked again RecheckAfter later. One whose
// provider cannot look it up (ErrLookupUnsupported) is reported for an
// operator, in ReconcileReport.NeedsOperator, a warning and an
// EventAttemptNeedsOperator event, every StaleAfter until someone records
// its outcome with the Manager's Complete, Fail or Cancel.
//
// Several reconcilers may run at once, in one process or many. Each claims
// an attempt before asking its provider (the store must be a
// [jobs.ClaimStore]), for a lease of LookupTimeout plus twice the Manager's
// WriteTimeout, counted from the moment it takes the claim: long enough for
// the claim's write, the lookup and the write that records the answer, so
// that a live reconciler always answers within its lease and no other asks
// the provider meanwhile. A reconciler that overruns its lease (a paused
// process) may be taken over; its late answer is then refused by the
// claim's token and counted in ReconcileReport.TakenOver. A runner's own
// result, which carries no claim, is always recorded.
type Reconciler struct {
	Manager *jobs.Manager

	// Providers by name, as in Runner.
	Providers map[string]Provider

	// StaleAfter is how long a starting or running attempt may go without
	// a change before it is examined. Make it longer than the runners'
	// AttemptTimeout, so that attempts a live runner is still waiting for
	// are left to it. Defaults to DefaultStaleAfter.
	StaleAfter time.Duration

	// RecheckAfter is how long after its last change an unknown attempt is
	// examined, and how long after a lookup that settled nothing (pending,
	// or failed) the attempt is examined again. Defaults to
	// DefaultRecheckAfter.
	RecheckAfter time.Duration

	// LookupTimeout bounds each Provider.Lookup. Defaults to
	// DefaultLookupTimeout.
	LookupTimeout time.Duration

	// BatchSize is how many attempts one pass examines at most. Defaults
	// to DefaultReconcileSize.
	BatchSize int

	// Logger defaults to the Manager's.
	Logger *slog.Logger
}

// Resolution is what a reconciler did with one attempt.
type Resolution struct {
	AttemptID string
	JobID     string
	Provider  string
	From      jobs.AttemptState // the state it was found in
	To        jobs.AttemptState // the state it was left in
	Reason    string
}

// ReconcileReport sums up one pass.
type ReconcileReport struct {
	Examined int          // stale attempts found
	Resolved []Resolution // moved to a terminal state by this pass
	Pending  int          // the provider is still working on it: asked again after RecheckAfter
	Claimed  int          // claimed first by another reconciler: left alone
	Settled  int          // resolved meanwhile by someone else
	// TakenOver counts attempts whose claim another reconciler took over
	// while this pass was asking the provider: its answer was not recorded.
	TakenOver int
	// NeedsOperator lists attempts left in doubt because their provider
	// cannot look them up (ErrLookupUnsupported).
	NeedsOperator []jobs.Attempt
	Errors        []error // lookups or writes that failed; retried after RecheckAfter
}

// claimPrefix makes claim tokens recognisable in the database. The rest of
// a token is random, so that no two claims share one.
const claimPrefix = "clm_"

// claim is an attempt this reconciler holds, and the token that proves it.
type claim struct {
	a     jobs.Attempt // as claimed
	token string
}

// ReconcileOnce examines up to BatchSize stale attempts once.
// Errors: [jobs.ErrStorage]; an error matching [errors.ErrUnsupported] when
// the Manager's store is not a [jobs.ClaimStore]. Problems with single
// attempts are in the report's Errors.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	m := r.Manager
	rs, ok := m.Store().(jobs.ClaimStore)
	if !ok {
		return rep, fmt.Errorf("failover: a Reconciler needs a store that lets it claim attempts; a %T does not: %w", m.Store(), errors.ErrUnsupported)
	}
	now := m.Now()
	batch := r.BatchSize
	if batch <= 0 {
		batch = DefaultReconcileSize
	}
	list, err := rs.StaleAttempts(ctx, jobs.StaleQuery{
		UnknownBefore: now.Add(-orDefault(r.RecheckAfter, DefaultRecheckAfter)),
		OpenBefore:    now.Add(-orDefault(r.StaleAfter, DefaultStaleAfter)),
		UnclaimedAt:   now,
		Limit:         batch,
	})
	if err != nil {
		return rep, err
	}
	rep.Examined = len(list)
	for _, a := range list {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c, claimed, err := r.claim(ctx, rs, a)
		if err != nil {
			rep.Errors = append(rep.Errors, err)
			continue
		}
		if !claimed {
			rep.Claimed++
			continue
		}
		r.resolve(ctx, rs, c, &rep)
	}
	return rep, nil
}

// Run reconciles every interval until ctx ends, and returns ctx's error.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return &jobs.InputError{Field: "every", Problem: "not positive"}
	}
	clock := r.Manager.Clock()
	for {
		rep, err := r.ReconcileOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger().ErrorContext(ctx, "failover: reconcile pass failed", "error", err)
		}
		for _, e := range rep.Errors {
			r.logger().WarnContext(ctx, "failover: reconcile", "error", e)
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
	return r.Manager.Options().Logger
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// lease is how long a claim lasts: the claim's write, the lookup and the
// write that records the answer each end within it.
func (r *Reconciler) lease() time.Duration {
	return orDefault(r.LookupTimeout, DefaultLookupTimeout) + 2*r.Manager.Options().WriteTimeout
}

// claim claims a, stale as listed, stamping the lease with the time the
// claim is taken.
func (r *Reconciler) claim(ctx context.Context, rs jobs.ClaimStore, a jobs.Attempt) (claim, bool, error) {
	m := r.Manager
	wctx, cancel := context.WithTimeout(ctx, m.Options().WriteTimeout)
	defer cancel()
	at := m.Now()
	c := claim{token: claimPrefix + rand.Text()}
	var ok bool
	var err error
	c.a, ok, err = rs.ClaimAttempt(wctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
		Token: c.token, At: at, Until: at.Add(r.lease())})
	return c, ok, err
}

// resolve asks the provider of the claimed attempt what became of it and
// records the answer, presenting the claim's token.
func (r *Reconciler) resolve(ctx context.Context, rs jobs.ClaimStore, c claim, rep *ReconcileReport) {
	a := c.a
	recheck := orDefault(r.RecheckAfter, DefaultRecheckAfter)
	p := r.Providers[a.Provider]
	if p == nil {
		err := fmt.Errorf("failover: reconcile attempt %s: no provider %q configured", a.ID, a.Provider)
		rep.Errors = append(rep.Errors, err)
		r.recordLookup(ctx, a, AnswerError+err.Error(), rep)
		r.postpone(ctx, rs, c, recheck, rep)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, orDefault(r.LookupTimeout, DefaultLookupTimeout))
	out, err := p.Lookup(lctx, a)
	cancel()
	r.recordLookup(ctx, a, answer(out, err), rep)
	switch {
	case errors.Is(err, ErrLookupUnsupported):
		if r.postpone(ctx, rs, c, orDefault(r.StaleAfter, DefaultStaleAfter), rep) {
			r.needsOperator(ctx, a, err, rep)
		}
		return
	case err != nil:
		rep.Errors = append(rep.Errors, fmt.Errorf("failover: reconcile attempt %s: lookup of %s at %s: %w", a.ID, lookupKey(a), a.Provider, err))
		r.postpone(ctx, rs, c, recheck, rep)
		return
	}
	switch out.State {
	case OutcomePending:
		if r.postpone(ctx, rs, c, recheck, rep) {
			rep.Pending++
		}
	case OutcomeSucceeded:
		r.complete(ctx, c, out.Result, rep)
	case OutcomeFailed:
		r.settle(ctx, c, jobs.AttemptFailed, jobs.SanitizeReason("provider reported failure: "+out.Reason), rep)
	case OutcomeNotFound:
		r.settle(ctx, c, jobs.AttemptCancelled, "provider never received the request and will not act on it", rep)
	default:
		rep.Errors = append(rep.Errors, fmt.Errorf("failover: reconcile attempt %s: provider %s answered unknown outcome %q", a.ID, a.Provider, out.State))
		r.postpone(ctx, rs, c, recheck, rep)
	}
}

// How a Reconciler records the answer to a lookup (jobs.AttemptLookup.Answer):
// the provider's OutcomeState ("pending", "succeeded", "not_found"),
// "failed: " and its reason, or one of these prefixes and the error.
const (
	AnswerUnsupported = "unsupported: " // the provider cannot look the request up (ErrLookupUnsupported): only an operator can resolve the attempt
	AnswerError       = "error: "       // the lookup failed; it is asked again later
)

// answer is what a lookup's outcome and error are recorded as.
func answer(out Outcome, err error) string {
	switch {
	case errors.Is(err, ErrLookupUnsupported):
		return AnswerUnsupported + err.Error()
	case err != nil:
		return AnswerError + err.Error()
	case out.State == OutcomeFailed && out.Reason != "":
		return "failed: " + out.Reason
	}
	return string(out.State)
}

// recordLookup records the lookup of a and its answer, where the store
// keeps lookups (jobs.LookupStore). The record is for operators: a failure
// to write it is reported, and the answer is acted on all the same.
func (r *Reconciler) recordLookup(ctx context.Context, a jobs.Attempt, ans string, rep *ReconcileReport) {
	ls, ok := r.Manager.Store().(jobs.LookupStore)
	if !ok {
		return
	}
	wctx, cancel := writeContext(ctx, r.Manager)
	defer cancel()
	err := ls.RecordLookup(wctx, jobs.AttemptLookup{AttemptID: a.ID, At: r.Manager.Now(), Answer: jobs.SanitizeReason(ans)})
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("failover: record the lookup of attempt %s: %w", a.ID, err))
	}
}

// ReconcileAttempt examines the attempt attemptID now, whatever its age:
// it claims it, asks its provider what became of it, records the lookup
// (where the store keeps lookups) and acts on the answer, as a pass of
// ReconcileOnce would. An operator's console offers it to look again
// without waiting for the next pass. The report says what happened: in
// Resolved, Pending, NeedsOperator or Errors, or Claimed when another
// reconciler holds the attempt.
//
// Errors: [jobs.ErrNotFound]; a *[jobs.TransitionError] (matching
// [jobs.ErrInvalidTransition]) when the attempt is no longer starting,
// running or unknown; [jobs.ErrStorage]; an error matching
// [errors.ErrUnsupported] when the store is not a [jobs.ClaimStore].
func (r *Reconciler) ReconcileAttempt(ctx context.Context, attemptID string) (ReconcileReport, error) {
	var rep ReconcileReport
	m := r.Manager
	rs, ok := m.Store().(jobs.ClaimStore)
	if !ok {
		return rep, fmt.Errorf("failover: a Reconciler needs a store that lets it claim attempts; a %T does not: %w", m.Store(), errors.ErrUnsupported)
	}
	a, err := m.Attempt(ctx, attemptID)
	if err != nil {
		return rep, err
	}
	if !a.State.Open() {
		return rep, &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: jobs.AttemptUnknown,
			Detail: "the attempt is no longer in doubt: there is nothing to look up"}
	}
	rep.Examined = 1
	c, claimed, err := r.claim(ctx, rs, a)
	if err != nil {
		return rep, err
	}
	if !claimed {
		rep.Claimed++
		return rep, nil
	}
	r.resolve(ctx, rs, c, &rep)
	return rep, nil
}

// lookupKey says how a's provider is asked about it.
func lookupKey(a jobs.Attempt) string {
	if a.ProviderRef != "" {
		return "reference " + a.ProviderRef
	}
	return "key " + a.ProviderKey()
}

// postpone sets the claim to end d from now, when the attempt is looked at
// again, and reports whether the claim still held.
func (r *Reconciler) postpone(ctx context.Context, rs jobs.ClaimStore, c claim, d time.Duration, rep *ReconcileReport) bool {
	m := r.Manager
	wctx, cancel := writeContext(ctx, m)
	defer cancel()
	held, err := rs.RenewClaim(wctx, jobs.AttemptClaim{ID: c.a.ID, Token: c.token, Until: m.Now().Add(d)})
	switch {
	case err != nil:
		rep.Errors = append(rep.Errors, err)
	case !held:
		rep.TakenOver++
	}
	return held
}

// complete offers the result the provider reported for the claimed attempt.
func (r *Reconciler) complete(ctx context.Context, c claim, result json.RawMessage, rep *ReconcileReport) {
	_, err := r.Manager.CompleteClaimed(ctx, c.a.ID, result, c.token)
	var to jobs.AttemptState
	switch {
	case err == nil:
		to = jobs.AttemptSucceeded
	case errors.Is(err, jobs.ErrClaimLost):
		rep.TakenOver++
		return
	case errors.Is(err, jobs.ErrLostRace):
		to = jobs.AttemptLost
	case errors.Is(err, jobs.ErrContractViolation):
		to = jobs.AttemptFailed // by Complete
	case errors.Is(err, jobs.ErrJobClosed):
		to = jobs.AttemptCancelled
	case errors.Is(err, jobs.ErrInvalidInput):
		// Not a result anything could use (empty, not JSON, too large):
		// the provider answered, and the answer is a failure.
		r.settle(ctx, c, jobs.AttemptFailed, jobs.SanitizeReason("provider reported an unusable result: "+err.Error()), rep)
		return
	case errors.Is(err, jobs.ErrInvalidTransition):
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
	r.resolved(ctx, c.a, to, reason, rep)
}

// settle moves the claimed attempt to a terminal state, failed or
// cancelled, as Fail or Cancel would, presenting the claim's token.
func (r *Reconciler) settle(ctx context.Context, c claim, to jobs.AttemptState, reason string, rep *ReconcileReport) {
	m := r.Manager
	start := time.Now()
	wctx, cancel := writeContext(ctx, m)
	defer cancel()
	a, err := m.Store().UpdateAttempt(wctx, jobs.AttemptUpdate{ID: c.a.ID, From: sources(to), To: to, Reason: reason,
		ClaimToken: c.token, At: m.Now()})
	switch {
	case errors.Is(err, jobs.ErrClaimLost):
		rep.TakenOver++
		return
	case errors.Is(err, jobs.ErrInvalidTransition):
		rep.Settled++
		return
	case err != nil:
		rep.Errors = append(rep.Errors, err)
		return
	}
	typ := jobs.EventAttemptCancelled
	if to == jobs.AttemptFailed {
		typ = jobs.EventAttemptFailed
	}
	m.Emit(ctx, jobs.Event{Type: typ, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider, Reason: reason, Duration: time.Since(start)})
	r.resolved(ctx, c.a, to, reason, rep)
}

func (r *Reconciler) resolved(ctx context.Context, a jobs.Attempt, to jobs.AttemptState, reason string, rep *ReconcileReport) {
	res := Resolution{AttemptID: a.ID, JobID: a.JobID, Provider: a.Provider, From: a.State, To: to, Reason: reason}
	rep.Resolved = append(rep.Resolved, res)
	r.logger().InfoContext(ctx, "failover: attempt reconciled", "job_id", a.JobID, "attempt_id", a.ID,
		"provider", a.Provider, "from", a.State, "to", to, "reason", reason)
	r.Manager.Emit(ctx, jobs.Event{Type: EventAttemptReconciled, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider,
		Reason: fmt.Sprintf("%s -> %s: %s", a.State, to, reason)})
}

// needsOperator reports a, which its provider cannot look up, for an
// operator to resolve; it stays in doubt meanwhile.
func (r *Reconciler) needsOperator(ctx context.Context, a jobs.Attempt, err error, rep *ReconcileReport) {
	rep.NeedsOperator = append(rep.NeedsOperator, a)
	r.logger().WarnContext(ctx, "failover: attempt in doubt needs an operator: its provider cannot look it up; resolve it with Complete, Fail or Cancel",
		"job_id", a.JobID, "attempt_id", a.ID, "provider", a.Provider, "state", a.State, "provider_key", a.ProviderKey(), "error", err)
	r.Manager.Emit(ctx, jobs.Event{Type: EventAttemptNeedsOperator, JobID: a.JobID, AttemptID: a.ID, Provider: a.Provider,
		Reason: "provider cannot look up " + lookupKey(a), Err: err})
}

// sources lists the states from which a claimed attempt, which is open, can
// move to the state to, by the attempt state machine.
func sources(to jobs.AttemptState) []jobs.AttemptState {
	var from []jobs.AttemptState
	for _, s := range [...]jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown} {
		if s.CanMoveTo(to) {
			from = append(from, s)
		}
	}
	return from
}

// writeContext detaches a write that records a provider's answer from the
// cancellation of ctx, bounded by the Manager's WriteTimeout, as the
// Manager detaches its own such writes: the answer is not lost to a pass
// that ends meanwhile.
func writeContext(ctx context.Context, m *jobs.Manager) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), m.Options().WriteTimeout)
}
