package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultAttemptTimeout is the Runner's per-attempt deadline when
// Runner.AttemptTimeout is zero.
const DefaultAttemptTimeout = time.Minute

// ErrNoProviderLeft means a Runner tried every eligible provider of a job
// and none produced a result: each failed definitively, broke the contract,
// or was not eligible. The job stays open; give up on it with FailJob.
var ErrNoProviderLeft = errors.New("jobs: no eligible provider left")

// Runner executes jobs end to end over a set of providers: the job's target
// provider first; after a silence of HedgeAfter, a hedge on the next
// verified fallback; on a definitive failure or a contract violation, the
// next eligible provider. The first result that passes the kind's contract
// and wins the compare-and-swap is the job's result; later results are
// dropped by Complete and logged.
//
// An attempt that produces no result within AttemptTimeout, or whose
// provider fails in a way that leaves the outcome in doubt, becomes unknown,
// never failed, and the Runner starts no further attempt for the job: a
// Reconciler resolves it by asking the provider.
//
// The Runner records every step through its Manager and never holds a
// database transaction across a provider call. It only starts an attempt
// the store accepts: one at a time, plus at most one hedge past a running
// (acknowledged) attempt, and on fallbacks only once CheckFailover passes.
// A Runner is safe for concurrent use once its fields are set.
type Runner struct {
	Manager *Manager

	// Providers by name: the names used as Job.Provider and in Fallbacks.
	Providers map[string]Provider

	// Fallbacks are tried after the job's target provider, in order. For a
	// kind with a contract only verified ones are used (see VerifyProvider).
	Fallbacks []string

	// HedgeAfter, if positive, starts a hedge on the next fallback when the
	// first attempt has produced no result after this long and has been
	// acknowledged. Zero means no hedging.
	HedgeAfter time.Duration

	// AttemptTimeout bounds each attempt, from its start to its result.
	// Defaults to DefaultAttemptTimeout.
	AttemptTimeout time.Duration

	// AbandonLosers cancels the provider calls still in flight once an
	// attempt has won, and records those attempts as cancelled. By default
	// the Runner waits for them (up to their deadline) so that their late
	// results are recorded as lost.
	AbandonLosers bool

	// Clock drives silences and deadlines. Defaults to SystemClock.
	Clock Clock

	// Logger defaults to the Manager's.
	Logger *slog.Logger
}

// Run executes the job with the given ID and returns it once it has a
// result, or once nothing more can be done.
//
// Errors: nil with the succeeded job; ErrAttemptInFlight (an
// *AttemptInFlightError naming an open attempt: another worker's, or one
// this Run or an earlier one left unknown, which a Reconciler resolves);
// ErrJobClosed (the job was failed or cancelled); ErrNoProviderLeft;
// ctx.Err() when ctx ended (the in-flight provider calls were cancelled and
// their attempts marked unknown); ErrNotFound, ErrInvalidInput, ErrStorage.
func (r *Runner) Run(ctx context.Context, jobID string) (Job, error) {
	m := r.Manager
	job, err := m.Get(ctx, jobID)
	if err != nil {
		return Job{}, err
	}
	switch job.State {
	case JobSucceeded:
		return job, nil
	case JobFailed, JobCancelled:
		return job, &JobClosedError{JobID: job.ID, State: job.State}
	}
	prev, err := m.Attempts(ctx, jobID)
	if err != nil {
		return Job{}, err
	}
	failed := map[string]bool{}
	for _, a := range prev {
		if a.State.Open() {
			// Another worker's attempt, or one left in doubt: the store
			// would refuse a new one (or allow only a hedge, which is the
			// business of whoever runs that attempt).
			return job, &AttemptInFlightError{JobID: job.ID, AttemptID: a.ID, State: a.State}
		}
		if a.State == AttemptFailed {
			failed[a.Provider] = true
		}
	}
	var candidates []string
	seen := map[string]bool{}
	for _, p := range append([]string{job.Provider}, r.Fallbacks...) {
		if seen[p] || failed[p] {
			continue
		}
		seen[p] = true
		candidates = append(candidates, p)
	}
	timeout := r.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	clock := r.Clock
	if clock == nil {
		clock = SystemClock
	}
	logger := r.Logger
	if logger == nil {
		logger = m.logger
	}
	ru := &run{
		r: r, m: m, job: job, clock: clock, logger: logger, timeout: timeout,
		candidates: candidates,
		inflight:   map[string]*flight{},
		msgs:       make(chan runMsg, 3*len(candidates)+3),
	}
	return ru.loop(ctx)
}

// run is the state of one Runner.Run. Only its loop goroutine touches it;
// provider calls and timers talk to it through msgs.
type run struct {
	r       *Runner
	m       *Manager
	job     Job
	clock   Clock
	logger  *slog.Logger
	timeout time.Duration

	candidates []string
	inflight   map[string]*flight
	msgs       chan runMsg

	hedgeTimer Timer
	hedgeFired bool

	stopStarting bool  // an attempt is in doubt, or the store refused one
	won          bool  // winner holds the job
	winner       Job   //
	closed       error // the job was closed by someone else
	doubt        error // *AttemptInFlightError for the attempt in doubt
	doubtState   AttemptState
	fatal        error // a storage error
	failures     []string
	stillUnknown []*flight // MarkUnknown refused while a hedge was starting; retried
}

type flight struct {
	a         Attempt
	hedge     bool
	cancel    context.CancelFunc
	deadline  Timer
	stopTimer chan struct{}
	acked     bool
	ref       string
	timedOut  bool // the deadline passed; the call was cancelled
	abandoned bool // cancelled because another attempt won
	acking    atomic.Bool
}

type msgKind int

const (
	msgAck msgKind = iota
	msgDone
	msgDeadline
)

type runMsg struct {
	kind   msgKind
	id     string
	ref    string
	result json.RawMessage
	err    error
}

func (ru *run) loop(ctx context.Context) (Job, error) {
	// Records outlive the caller's cancellation (bounded by WriteTimeout in
	// the Manager); provider calls do not.
	wctx := context.WithoutCancel(ctx)
	done := ctx.Done()
	for {
		if ctx.Err() == nil {
			ru.tryStart(ctx)
		}
		if len(ru.inflight) == 0 {
			break
		}
		var hedgeC <-chan time.Time
		if ru.hedgeTimer != nil && !ru.hedgeFired {
			hedgeC = ru.hedgeTimer.C()
		}
		select {
		case <-done:
			done = nil
			for _, f := range ru.inflight {
				f.cancel()
			}
		case <-hedgeC:
			ru.hedgeFired = true
		case msg := <-ru.msgs:
			ru.handle(wctx, ctx, msg)
		}
		ru.retryUnknown(wctx)
	}
	if ru.hedgeTimer != nil {
		ru.hedgeTimer.Stop()
	}
	switch {
	case ru.won:
		return ru.winner, nil
	case ru.closed != nil:
		j, err := ru.m.Get(wctx, ru.job.ID)
		if err != nil {
			return Job{}, ru.closed
		}
		if j.State == JobSucceeded {
			// Completed meanwhile, e.g. by a reconciler that learned the
			// result of one of these attempts first.
			return j, nil
		}
		return j, ru.closed
	case ctx.Err() != nil:
		return Job{}, ctx.Err()
	case ru.fatal != nil:
		return Job{}, ru.fatal
	case ru.doubt != nil:
		j, _ := ru.m.Get(wctx, ru.job.ID)
		return j, ru.doubt
	}
	if j, err := ru.m.Get(wctx, ru.job.ID); err == nil && j.State == JobSucceeded {
		return j, nil // completed by someone else meanwhile
	}
	reason := "no provider configured"
	if len(ru.failures) > 0 {
		reason = strings.Join(ru.failures, "; ")
	}
	return Job{}, fmt.Errorf("%w for job %s: %s", ErrNoProviderLeft, ru.job.ID, reason)
}

// tryStart starts the next attempt if the job needs one and the store would
// accept it: nothing in flight, or a hedge once the silence has passed and
// every attempt in flight was acknowledged (running).
func (ru *run) tryStart(ctx context.Context) {
	if ru.won || ru.closed != nil || ru.stopStarting || ru.fatal != nil {
		return
	}
	hedge := false
	switch {
	case len(ru.inflight) == 0:
	case ru.hedgeFired && len(ru.inflight) == 1:
		for _, f := range ru.inflight {
			if !f.acked || f.timedOut {
				return
			}
		}
		hedge = true
	default:
		return
	}
	for len(ru.candidates) > 0 {
		name := ru.candidates[0]
		ru.candidates = ru.candidates[1:]
		p := ru.r.Providers[name]
		if p == nil {
			ru.failures = append(ru.failures, name+": no such provider")
			continue
		}
		if err := ru.m.CheckFailover(ctx, ru.job, name); err != nil {
			if errors.Is(err, ErrProviderUnverified) {
				ru.logger.InfoContext(ctx, "jobs: runner skips unverified fallback", "job_id", ru.job.ID, "provider", name, "error", err)
				ru.failures = append(ru.failures, name+": not verified")
				continue
			}
			ru.fatal = err
			return
		}
		var opts []AttemptOption
		if hedge {
			opts = append(opts, Hedge())
		}
		a, err := ru.m.StartAttempt(ctx, ru.job.ID, name, opts...)
		switch {
		case err == nil:
			ru.launch(ctx, p, a, hedge)
			return
		case errors.Is(err, ErrProviderUnverified):
			ru.failures = append(ru.failures, name+": not verified")
			continue
		case errors.Is(err, ErrAttemptInFlight):
			// Another worker's attempt, or one left in doubt earlier.
			ru.stopStarting = true
			if !hedge {
				ru.doubt = err
			}
			return
		case errors.Is(err, ErrJobClosed):
			ru.closed = err
			return
		default:
			ru.fatal = err
			return
		}
	}
}

func (ru *run) launch(ctx context.Context, p Provider, a Attempt, hedge bool) {
	cctx, cancel := context.WithCancel(ctx)
	f := &flight{a: a, hedge: hedge, cancel: cancel, stopTimer: make(chan struct{})}
	ru.inflight[a.ID] = f
	if hedge {
		ru.logger.InfoContext(ctx, "jobs: hedging after silence", "job_id", ru.job.ID, "attempt_id", a.ID,
			"provider", a.Provider, "silence", ru.r.HedgeAfter)
		ru.m.emit(ctx, Event{Type: EventHedgeStarted, JobID: ru.job.ID, AttemptID: a.ID, Kind: ru.job.Kind, Provider: a.Provider})
	} else if ru.r.HedgeAfter > 0 {
		// The silence is counted from the latest non-hedge attempt.
		if ru.hedgeTimer != nil {
			ru.hedgeTimer.Stop()
		}
		ru.hedgeTimer = ru.clock.NewTimer(ru.r.HedgeAfter)
		ru.hedgeFired = false
	}
	deadline := ru.clock.NewTimer(ru.timeout)
	f.deadline = deadline
	msgs := ru.msgs
	go func() {
		select {
		case <-deadline.C():
			msgs <- runMsg{kind: msgDeadline, id: a.ID}
		case <-f.stopTimer:
		}
	}()
	job := ru.job
	m := ru.m
	ack := func(ref string) error {
		if !f.acking.CompareAndSwap(false, true) {
			return nil // acknowledged already
		}
		_, err := m.MarkRunning(cctx, a.ID, ref)
		msgs <- runMsg{kind: msgAck, id: a.ID, ref: ref, err: err}
		return err
	}
	go func() {
		res, err := p.Call(cctx, job, a, ack)
		msgs <- runMsg{kind: msgDone, id: a.ID, result: res, err: err}
	}()
}

func (ru *run) handle(wctx, ctx context.Context, msg runMsg) {
	f := ru.inflight[msg.id]
	if f == nil {
		return
	}
	switch msg.kind {
	case msgAck:
		if msg.err != nil {
			ru.logger.WarnContext(ctx, "jobs: could not record acknowledgement", "job_id", ru.job.ID,
				"attempt_id", msg.id, "provider_ref", msg.ref, "error", msg.err)
			return
		}
		f.acked, f.ref = true, msg.ref
	case msgDeadline:
		if f.timedOut || f.abandoned {
			return
		}
		f.timedOut = true
		f.cancel()
		ru.inDoubt(wctx, f, fmt.Sprintf("no result within %s", ru.timeout))
	case msgDone:
		delete(ru.inflight, msg.id)
		f.deadline.Stop()
		close(f.stopTimer)
		f.cancel()
		ru.finish(wctx, ctx, f, msg.result, msg.err)
	}
}

// finish records what a returned provider call produced.
func (ru *run) finish(wctx, ctx context.Context, f *flight, result json.RawMessage, callErr error) {
	id := f.a.ID
	if callErr == nil {
		if err := ru.m.checkResult(result); err != nil {
			// An empty body or something that is not JSON: the provider
			// answered, but not with anything usable.
			var in *InputError
			errors.As(err, &in)
			reason := "unusable result: " + in.Problem
			if _, err := ru.m.Fail(wctx, id, reason); err != nil && !errors.Is(err, ErrInvalidTransition) {
				ru.fatal = err
			}
			ru.logger.WarnContext(ctx, "jobs: unusable result", "job_id", ru.job.ID, "attempt_id", id, "provider", f.a.Provider, "reason", reason)
			ru.failures = append(ru.failures, f.a.Provider+": "+reason)
			return
		}
		// A result is the truth, whenever it comes: offer it even after
		// the deadline (unknown → succeeded or lost).
		j, err := ru.m.Complete(wctx, id, result)
		var cv *ContractViolationError
		switch {
		case err == nil:
			ru.won, ru.winner = true, j
			ru.logger.InfoContext(ctx, "jobs: attempt won", "job_id", j.ID, "attempt_id", id, "provider", f.a.Provider)
			if ru.r.AbandonLosers {
				ru.abandonLosers(wctx)
			}
		case errors.Is(err, ErrLostRace):
			// Dropped and logged by Complete.
		case errors.As(err, &cv):
			ru.failures = append(ru.failures, f.a.Provider+": "+cv.Reason)
		case errors.Is(err, ErrJobClosed):
			ru.closed = err
			ru.abandonLosers(wctx)
		case errors.Is(err, ErrInvalidTransition):
			// Resolved meanwhile by someone else (a reconciler, a cancel).
			if j, gerr := ru.m.Get(wctx, ru.job.ID); gerr == nil && j.State == JobSucceeded {
				ru.won, ru.winner = true, j
			}
		default:
			ru.logger.ErrorContext(ctx, "jobs: could not record result", "job_id", ru.job.ID, "attempt_id", id, "error", err)
			ru.fatal = err
		}
		return
	}
	switch {
	case f.timedOut || f.abandoned:
		// Already recorded.
	case IsDefinitive(callErr):
		reason := "provider refused: " + callErr.Error()
		if _, err := ru.m.Fail(wctx, id, sanitizeReason(reason)); err != nil && !errors.Is(err, ErrInvalidTransition) {
			ru.fatal = err
		}
		ru.failures = append(ru.failures, f.a.Provider+": "+callErr.Error())
	case ctx.Err() != nil:
		ru.inDoubt(wctx, f, "caller cancelled: "+ctx.Err().Error())
	default:
		ru.inDoubt(wctx, f, "provider error: "+callErr.Error())
	}
}

// inDoubt records that f's outcome is unknown, and stops further attempts:
// none may start while one is in doubt. Once the job has a winner the
// attempt is recorded as unknown all the same (a reconciler will find it
// lost), unless losers are abandoned.
func (ru *run) inDoubt(wctx context.Context, f *flight, reason string) {
	if ru.won && ru.r.AbandonLosers {
		ru.cancelAttempt(wctx, f)
		return
	}
	ru.stopStarting = true
	_, err := ru.m.MarkUnknown(wctx, f.a.ID, sanitizeReason(reason))
	switch {
	case err == nil:
		ru.noteDoubt(f.a.ID, AttemptUnknown)
	case errors.Is(err, ErrInvalidTransition):
	case errors.Is(err, ErrAttemptInFlight):
		// A hedge is still starting: try again once it moves on.
		ru.stillUnknown = append(ru.stillUnknown, f)
		f.a.Reason = reason
	default:
		ru.fatal = err
	}
}

func (ru *run) retryUnknown(wctx context.Context) {
	if len(ru.stillUnknown) == 0 {
		return
	}
	pending := ru.stillUnknown
	ru.stillUnknown = nil
	for _, f := range pending {
		_, err := ru.m.MarkUnknown(wctx, f.a.ID, sanitizeReason(f.a.Reason))
		switch {
		case err == nil:
			ru.noteDoubt(f.a.ID, AttemptUnknown)
		case errors.Is(err, ErrAttemptInFlight):
			ru.stillUnknown = append(ru.stillUnknown, f)
		}
	}
	if len(ru.stillUnknown) > 0 && len(ru.inflight) == 0 {
		// Nothing left to wait for: the attempt stays running and a
		// reconciler finds it stale.
		for _, f := range ru.stillUnknown {
			ru.logger.WarnContext(wctx, "jobs: attempt left running for the reconciler", "job_id", ru.job.ID, "attempt_id", f.a.ID)
			ru.noteDoubt(f.a.ID, AttemptRunning)
		}
		ru.stillUnknown = nil
	}
}

// noteDoubt remembers the attempt Run reports as in doubt: the first that
// became unknown, else one left running.
func (ru *run) noteDoubt(id string, state AttemptState) {
	if ru.doubt != nil && (state != AttemptUnknown || ru.doubtState == AttemptUnknown) {
		return
	}
	ru.doubt = &AttemptInFlightError{JobID: ru.job.ID, AttemptID: id, State: state}
	ru.doubtState = state
}

func (ru *run) abandonLosers(wctx context.Context) {
	for _, f := range ru.inflight {
		if !f.abandoned && !f.timedOut {
			ru.cancelAttempt(wctx, f)
		}
	}
}

func (ru *run) cancelAttempt(wctx context.Context, f *flight) {
	f.abandoned = true
	f.cancel()
	reason := "abandoned: the job is closed"
	if ru.won {
		reason = "abandoned: attempt " + ru.winner.CompletedBy + " completed the job"
	}
	if _, err := ru.m.Cancel(wctx, f.a.ID, reason); err != nil && !errors.Is(err, ErrInvalidTransition) {
		ru.logger.WarnContext(wctx, "jobs: could not cancel attempt", "attempt_id", f.a.ID, "error", err)
	}
}
