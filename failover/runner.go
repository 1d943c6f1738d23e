package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/intentjobs/jobs"
)

// DefaultAttemptTimeout is the Runner's per-attempt deadline when
// Runner.AttemptTimeout is zero.
const DefaultAttemptTimeout = time.Minute

// ErrNoProviderLeft means a Runner tried every eligible provider of a job
// and none produced a result: each failed definitively, broke the contract,
// or was not eligible. The job stays open; give up on it with
// [jobs.Manager.FailJob].
var ErrNoProviderLeft = errors.New("failover: no eligible provider left")

// Runner executes jobs end to end over a set of providers: the job's target
// provider first, then its Fallbacks in order. The first result that passes
// the kind's contract and wins the compare-and-swap is the job's result;
// later results are dropped by [jobs.Manager.Complete] and logged.
//
// Failing over means that another provider may carry out the intent again,
// so the Runner does it only where that is safe:
//
//	what happened to the attempt        the Runner
//	Definitive error                    fails it and starts the next provider:
//	  (the provider did nothing)          safe
//	contract violation,                 fails it and starts the next provider:
//	  unusable result                     the provider did the work, and failing
//	                                      over repeats its side effects; safe only
//	                                      for kinds without any, such as model calls
//	timeout (acknowledged or not),      never fails over: the attempt becomes
//	  any other error, the caller         unknown and nothing starts until a
//	  cancelled                           Reconciler resolves it
//	silence of HedgeAfter               starts a hedge on the next verified
//	                                      fallback: opt-in, and only past a
//	                                      running (acknowledged) attempt
//
// It moves on only past a failure it recorded itself. If the attempt was
// resolved meanwhile by someone else (a Reconciler, an operator's Cancel),
// if another attempt completed the job, or if the store refuses a new
// attempt for any reason but an unverified provider, it starts nothing
// more.
//
// The Runner records every step through its Manager and never holds a
// database transaction across a provider call. Every record of an outcome
// (acknowledgement, result, failure, doubt, cancellation) is written on a
// context detached from the caller's, bounded by [jobs.Options].WriteTimeout, so
// that what a provider said as the caller gave up is not lost. It only
// starts an attempt the store accepts: one at a time, plus at most one
// hedge past a running attempt, and on fallbacks only once
// [jobs.Manager.CheckFailover] passes. A Runner is safe for concurrent use once its fields are set.
type Runner struct {
	Manager *jobs.Manager

	// Providers by name: the names used as Job.Provider and in Fallbacks.
	Providers map[string]Provider

	// Fallbacks are tried after the job's target provider, in order. For a
	// kind with a contract only verified ones are used (see
	// [jobs.Manager.VerifyProvider]).
	Fallbacks []string

	// HedgeAfter, if positive, starts a hedge on the next fallback when the
	// first attempt has produced no result after this long and has been
	// acknowledged. Zero means no hedging.
	HedgeAfter time.Duration

	// AttemptTimeout bounds each attempt, from its start to its result.
	// Defaults to DefaultAttemptTimeout.
	AttemptTimeout time.Duration

	// AbandonLosers cancels the provider calls still in flight once the job
	// is done, completed by an attempt or closed by someone else (CancelJob),
	// and returns once the calls have returned. It records those attempts
	// as cancelled ("abandoned: …") when another attempt completed the job,
	// and as unknown when the job was closed without a winner: the provider
	// may still act on such a call, and the job must keep its key until a
	// Reconciler learns what it did. By default the Runner waits for them
	// (up to their deadline) and records what each produced: a late result
	// is dropped by Complete and its attempt recorded as lost, or as
	// cancelled ([jobs.ReasonDroppedJobCancelled]) on a closed job; a call that
	// runs out of time leaves its attempt unknown, for a Reconciler.
	// Waiting records the truth; abandoning returns sooner, but records as
	// cancelled the losers of a completed job whose provider may have done
	// the work too.
	AbandonLosers bool

	// Logger defaults to the Manager's.
	Logger *slog.Logger
}

// Run executes the job with the given ID and returns it once it has a
// result, or once nothing more can be done.
//
// Errors: nil with the succeeded job (also when another attempt completed
// it); [jobs.ErrAttemptInFlight] (a *jobs.AttemptInFlightError naming an
// open attempt: another worker's, or one this Run or an earlier one left
// unknown, which a Reconciler resolves); [jobs.ErrJobClosed] (the job was
// failed or cancelled); [jobs.ErrInvalidTransition] (wrapping a
// *jobs.TransitionError: an attempt was resolved by someone else while its
// provider call ran, so what the call produced could not be recorded, and
// nothing more was started); ErrNoProviderLeft; ctx.Err() when ctx ended
// (the in-flight provider calls were cancelled and their attempts marked
// unknown); [jobs.ErrNotFound], [jobs.ErrInvalidInput], [jobs.ErrStorage].
func (r *Runner) Run(ctx context.Context, jobID string) (jobs.Job, error) {
	m := r.Manager
	job, err := m.Get(ctx, jobID)
	if err != nil {
		return jobs.Job{}, err
	}
	switch job.State {
	case jobs.JobSucceeded:
		return job, nil
	case jobs.JobFailed, jobs.JobCancelled:
		return job, &jobs.JobClosedError{JobID: job.ID, State: job.State}
	}
	prev, err := m.Attempts(ctx, jobID)
	if err != nil {
		return jobs.Job{}, err
	}
	failed := map[string]bool{}
	for _, a := range prev {
		if a.State.Open() {
			// Another worker's attempt, or one left in doubt: the store
			// would refuse a new one (or allow only a hedge, which is the
			// business of whoever runs that attempt).
			return job, &jobs.AttemptInFlightError{JobID: job.ID, AttemptID: a.ID, State: a.State}
		}
		if a.State == jobs.AttemptFailed {
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
	opts := m.Options()
	logger := r.Logger
	if logger == nil {
		logger = opts.Logger
	}
	ru := &run{
		r: r, m: m, job: job, clock: opts.Clock, logger: logger,
		timeout: timeout, writeTimeout: opts.WriteTimeout,
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
	m       *jobs.Manager
	job     jobs.Job
	clock   jobs.Clock
	logger  *slog.Logger
	timeout time.Duration

	writeTimeout time.Duration // the Manager's: bounds the reads that learn how a run ended

	candidates []string
	inflight   map[string]*flight
	msgs       chan runMsg

	hedgeTimer jobs.Timer
	hedgeFired bool

	stopStarting bool     // an attempt is in doubt, or the store refused one
	won          bool     // the job has a winner (an attempt of this run or another's)
	winner       jobs.Job // the job as completed
	closed       error    // the job was closed by someone else
	unrecorded   error    // what a call produced could not be recorded: someone else resolved its attempt
	doubt        error    // *AttemptInFlightError for the attempt in doubt
	doubtState   jobs.AttemptState
	fatal        error // a storage error
	failures     []string
	stillUnknown []*flight // MarkUnknown refused while a hedge was starting; retried
}

type flight struct {
	a         jobs.Attempt
	hedge     bool
	cancel    context.CancelFunc
	deadline  jobs.Timer
	stopTimer chan struct{}
	acked     bool
	ref       string
	timedOut  bool // the deadline passed; the call was cancelled
	abandoned bool // cancelled by this run: the job was completed or closed (AbandonLosers)
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
	state  jobs.AttemptState // msgAck: the attempt's state once the reference is recorded
	result json.RawMessage
	err    error
}

func (ru *run) loop(ctx context.Context) (jobs.Job, error) {
	// Records outlive the caller's cancellation (bounded by WriteTimeout in
	// the Manager); provider calls do not.
	wctx := context.WithoutCancel(ctx)
	done := ctx.Done()
	for {
		if ctx.Err() == nil {
			ru.tryStart(ctx, wctx)
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
		j, err := ru.jobNow(wctx)
		if err != nil {
			return jobs.Job{}, ru.closed
		}
		if j.State == jobs.JobSucceeded {
			// Completed meanwhile, e.g. by a reconciler that learned the
			// result of one of these attempts first.
			return j, nil
		}
		return j, ru.closed
	case ru.unrecorded != nil:
		j, _ := ru.jobNow(wctx)
		return j, ru.unrecorded
	case ctx.Err() != nil:
		return jobs.Job{}, ctx.Err()
	case ru.fatal != nil:
		return jobs.Job{}, ru.fatal
	case ru.doubt != nil:
		j, _ := ru.jobNow(wctx)
		return j, ru.doubt
	}
	if j, err := ru.jobNow(wctx); err == nil && j.State == jobs.JobSucceeded {
		return j, nil // completed by someone else meanwhile
	}
	reason := "no provider configured"
	if len(ru.failures) > 0 {
		reason = strings.Join(ru.failures, "; ")
	}
	return jobs.Job{}, fmt.Errorf("%w for job %s: %s", ErrNoProviderLeft, ru.job.ID, reason)
}

// tryStart starts the next attempt if the job needs one and the store would
// accept it: nothing in flight, or a hedge once the silence has passed and
// every attempt in flight was acknowledged (running).
//
// Nothing in flight means that every attempt so far ended in a way that
// allows the next provider: its provider did nothing (a definitive error
// this run recorded as failed) or its result was refused on its merits
// (unusable, or against the contract, recorded as failed). Every other end
// sets one of the fields checked first, and then nothing starts.
//
// The attempt starts on the caller's ctx: once the caller is gone, no new
// work begins.
func (ru *run) tryStart(ctx, wctx context.Context) {
	if ru.won || ru.closed != nil || ru.unrecorded != nil || ru.stopStarting || ru.fatal != nil {
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
			if errors.Is(err, jobs.ErrProviderUnverified) {
				ru.logger.InfoContext(ctx, "failover: runner skips unverified fallback", "job_id", ru.job.ID, "provider", name, "error", err)
				ru.failures = append(ru.failures, name+": not verified")
				continue
			}
			ru.fatal = err
			return
		}
		var opts []jobs.AttemptOption
		if hedge {
			opts = append(opts, jobs.Hedge())
		}
		a, err := ru.m.StartAttempt(ctx, ru.job.ID, name, opts...)
		switch {
		case err == nil:
			ru.launch(ctx, wctx, p, a, hedge)
			return
		case errors.Is(err, jobs.ErrProviderUnverified):
			// Refused before anything was written: this provider may not
			// take the job, the next one may.
			ru.failures = append(ru.failures, name+": not verified")
			continue
		case errors.Is(err, jobs.ErrAttemptInFlight):
			// Another worker's attempt, or one left in doubt earlier.
			ru.stopStarting = true
			if !hedge {
				ru.doubt = err
			}
			return
		case errors.Is(err, jobs.ErrJobClosed):
			ru.closedMeanwhile(wctx, err)
			return
		default:
			ru.fatal = err
			return
		}
	}
}

// launch calls p for attempt a on a context that ends with the caller's
// ctx or at the attempt's deadline. What the call reports is recorded on
// wctx, which outlives both: an acknowledgement that comes as the caller
// gives up still records the provider's reference.
func (ru *run) launch(ctx, wctx context.Context, p Provider, a jobs.Attempt, hedge bool) {
	cctx, cancel := context.WithCancel(ctx)
	f := &flight{a: a, hedge: hedge, cancel: cancel, stopTimer: make(chan struct{})}
	ru.inflight[a.ID] = f
	if hedge {
		ru.logger.InfoContext(ctx, "failover: hedging after silence", "job_id", ru.job.ID, "attempt_id", a.ID,
			"provider", a.Provider, "silence", ru.r.HedgeAfter)
		ru.m.Emit(ctx, jobs.Event{Type: EventHedgeStarted, JobID: ru.job.ID, AttemptID: a.ID, Kind: ru.job.Kind, Provider: a.Provider})
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
		got, err := m.MarkRunning(wctx, a.ID, ref)
		msgs <- runMsg{kind: msgAck, id: a.ID, ref: ref, state: got.State, err: err}
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
			ru.logger.WarnContext(ctx, "failover: could not record acknowledgement", "job_id", ru.job.ID,
				"attempt_id", msg.id, "provider_ref", msg.ref, "error", msg.err)
			return
		}
		// Only a running attempt may be hedged; one that became unknown
		// first has learned its reference and stays in doubt.
		f.acked, f.ref = msg.state == jobs.AttemptRunning, msg.ref
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
	switch {
	case f.abandoned:
		// Given up by this run once the job had a winner or was closed,
		// and recorded then. A result that comes all the same is the
		// truth: offered, it is dropped and recorded on the attempt if it
		// is still open (see cancelAttempt); otherwise it is only logged.
		if callErr == nil {
			if _, err := ru.m.Complete(wctx, f.a.ID, result); errors.Is(err, jobs.ErrInvalidTransition) || errors.Is(err, jobs.ErrInvalidInput) {
				ru.logger.InfoContext(ctx, "failover: abandoned attempt returned a result; dropped", "job_id", ru.job.ID,
					"attempt_id", f.a.ID, "provider", f.a.Provider)
			}
		}
	case callErr == nil:
		// A result is the truth, whenever it comes: offer it even after
		// the deadline (unknown → succeeded or lost).
		ru.offer(wctx, ctx, f, result)
	case f.timedOut:
		// Recorded as unknown when the deadline passed.
	case IsDefinitive(callErr):
		ru.fail(wctx, f, "provider refused: "+callErr.Error(), callErr.Error())
	case ctx.Err() != nil:
		ru.inDoubt(wctx, f, "caller cancelled: "+ctx.Err().Error())
	default:
		ru.inDoubt(wctx, f, "provider error: "+callErr.Error())
	}
}

// offer records a result the provider returned.
func (ru *run) offer(wctx, ctx context.Context, f *flight, result json.RawMessage) {
	id := f.a.ID
	j, err := ru.m.Complete(wctx, id, result)
	var in *jobs.InputError
	var cv *jobs.ContractViolationError
	switch {
	case err == nil:
		ru.logger.DebugContext(ctx, "failover: attempt won", "job_id", j.ID, "attempt_id", id, "provider", f.a.Provider)
		ru.hasWinner(wctx, j)
	case errors.As(err, &in) && in.Field == "Result":
		// An empty body or something that is not JSON: the provider
		// answered, but not with anything usable. Complete refused it
		// before writing anything.
		reason := "unusable result: " + in.Problem
		ru.logger.WarnContext(ctx, "failover: unusable result", "job_id", ru.job.ID, "attempt_id", id, "provider", f.a.Provider, "reason", reason)
		ru.fail(wctx, f, reason, reason)
	case errors.Is(err, jobs.ErrLostRace):
		// Another attempt completed the job first (Complete dropped this
		// result and logged the race): the job is done.
		ru.stopStarting = true
		j, gerr := ru.jobNow(wctx)
		if gerr != nil {
			ru.fatal = gerr
			return
		}
		ru.hasWinner(wctx, j)
	case errors.As(err, &cv):
		// Complete records a violation as a failure, unless the attempt
		// was resolved meanwhile: only a recorded failure allows the next
		// provider.
		rctx, cancel := context.WithTimeout(wctx, ru.writeTimeout)
		a, aerr := ru.m.Attempt(rctx, id)
		cancel()
		switch {
		case aerr != nil:
			ru.fatal = aerr
		case a.State == jobs.AttemptFailed:
			ru.failures = append(ru.failures, f.a.Provider+": "+cv.Reason)
		default:
			ru.resolvedMeanwhile(wctx, f, "the contract violation of its result",
				&jobs.TransitionError{AttemptID: id, From: a.State, To: jobs.AttemptFailed})
		}
	case errors.Is(err, jobs.ErrJobClosed):
		ru.closedMeanwhile(wctx, err)
	case errors.Is(err, jobs.ErrInvalidTransition):
		ru.resolvedMeanwhile(wctx, f, "its result", err)
	default:
		ru.logger.ErrorContext(ctx, "failover: could not record result", "job_id", ru.job.ID, "attempt_id", id, "error", err)
		ru.fatal = err
	}
}

// fail records that f's provider did nothing (a definitive error) or
// nothing usable. Only a failure recorded here, or found recorded already,
// lets the run move on to the next provider.
func (ru *run) fail(wctx context.Context, f *flight, reason, summary string) {
	_, err := ru.m.Fail(wctx, f.a.ID, jobs.SanitizeReason(reason))
	switch {
	case err == nil:
		ru.failures = append(ru.failures, f.a.Provider+": "+summary)
	case errors.Is(err, jobs.ErrInvalidTransition):
		ru.resolvedMeanwhile(wctx, f, "its failure", err)
	default:
		ru.fatal = err
	}
}

// resolvedMeanwhile handles an attempt that someone else (a reconciler, an
// operator's Cancel) moved to a terminal state while its call was running,
// so that what the call produced (what) cannot be recorded; err says so.
// The provider may have done the work: the run starts nothing more. If the
// job has a winner, that is the run's answer; otherwise Run returns err.
func (ru *run) resolvedMeanwhile(wctx context.Context, f *flight, what string, err error) {
	ru.stopStarting = true
	if j, gerr := ru.jobNow(wctx); gerr == nil && j.State == jobs.JobSucceeded {
		// E.g. a reconciler learned this attempt's result first.
		ru.hasWinner(wctx, j)
		return
	}
	ru.logger.ErrorContext(wctx, "failover: attempt resolved by someone else while its provider call ran; starting nothing more",
		"job_id", ru.job.ID, "attempt_id", f.a.ID, "provider", f.a.Provider, "not_recorded", what, "error", err)
	if ru.unrecorded == nil {
		ru.unrecorded = fmt.Errorf("failover: runner: job %s: attempt %s was resolved by someone else while its provider call ran; %s was not recorded: %w",
			ru.job.ID, f.a.ID, what, err)
	}
}

// hasWinner records that the job was completed (j), by an attempt of this
// run or by another; with AbandonLosers the calls still in flight are
// cancelled.
func (ru *run) hasWinner(wctx context.Context, j jobs.Job) {
	ru.won, ru.winner = true, j
	if ru.r.AbandonLosers {
		ru.abandonLosers(wctx)
	}
}

// closedMeanwhile records that the job was failed or cancelled by someone
// else. By default the calls still in flight run to their end (or their
// deadline) and their outcomes are recorded: a result is dropped by
// Complete and its attempt recorded as cancelled, a timeout leaves it
// unknown. With AbandonLosers they are cancelled now.
func (ru *run) closedMeanwhile(wctx context.Context, err error) {
	ru.closed = err
	if ru.r.AbandonLosers {
		ru.abandonLosers(wctx)
	}
}

// inDoubt records that f's outcome is unknown, and stops further attempts:
// none may start while one is in doubt. Once the job has a winner the
// attempt is recorded as unknown all the same (a reconciler will find it
// lost), unless losers are abandoned.
func (ru *run) inDoubt(wctx context.Context, f *flight, reason string) {
	if (ru.won || ru.closed != nil) && ru.r.AbandonLosers {
		ru.cancelAttempt(wctx, f)
		return
	}
	ru.stopStarting = true
	_, err := ru.m.MarkUnknown(wctx, f.a.ID, jobs.SanitizeReason(reason))
	switch {
	case err == nil:
		ru.noteDoubt(f.a.ID, jobs.AttemptUnknown)
	case errors.Is(err, jobs.ErrInvalidTransition):
		ru.resolvedMeanwhile(wctx, f, "its doubt ("+reason+")", err)
	case errors.Is(err, jobs.ErrAttemptInFlight):
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
		_, err := ru.m.MarkUnknown(wctx, f.a.ID, jobs.SanitizeReason(f.a.Reason))
		switch {
		case err == nil:
			ru.noteDoubt(f.a.ID, jobs.AttemptUnknown)
		case errors.Is(err, jobs.ErrAttemptInFlight):
			ru.stillUnknown = append(ru.stillUnknown, f)
		case errors.Is(err, jobs.ErrInvalidTransition):
			ru.resolvedMeanwhile(wctx, f, "its doubt ("+f.a.Reason+")", err)
		default:
			ru.fatal = err
		}
	}
	if len(ru.stillUnknown) > 0 && len(ru.inflight) == 0 {
		// Nothing left to wait for: the attempt stays running and a
		// reconciler finds it stale.
		for _, f := range ru.stillUnknown {
			ru.logger.WarnContext(wctx, "failover: attempt left running for the reconciler", "job_id", ru.job.ID, "attempt_id", f.a.ID)
			ru.noteDoubt(f.a.ID, jobs.AttemptRunning)
		}
		ru.stillUnknown = nil
	}
}

// jobNow reads the job as it is now, to learn how a run ended. Like the
// records before it, the read outlives the caller (wctx) and is bounded by
// jobs.Options.WriteTimeout.
func (ru *run) jobNow(wctx context.Context) (jobs.Job, error) {
	rctx, cancel := context.WithTimeout(wctx, ru.writeTimeout)
	defer cancel()
	return ru.m.Get(rctx, ru.job.ID)
}

// noteDoubt remembers the attempt Run reports as in doubt: the first that
// became unknown, else one left running.
func (ru *run) noteDoubt(id string, state jobs.AttemptState) {
	if ru.doubt != nil && (state != jobs.AttemptUnknown || ru.doubtState == jobs.AttemptUnknown) {
		return
	}
	ru.doubt = &jobs.AttemptInFlightError{JobID: ru.job.ID, AttemptID: id, State: state}
	ru.doubtState = state
}

func (ru *run) abandonLosers(wctx context.Context) {
	for _, f := range ru.inflight {
		if !f.abandoned && !f.timedOut {
			ru.cancelAttempt(wctx, f)
		}
	}
}

// cancelAttempt stops waiting for f's call and records what that leaves.
// Once another attempt completed the job, the attempt is cancelled: the
// job has its result and keeps its key for good. On a job closed without
// a winner, the provider may still act on the call, so the attempt is
// recorded as unknown, never as cancelled: it keeps the job's key (see
// jobs.KeyReuse) until a Reconciler learns what the provider did. If another
// attempt is in doubt already, it stays as it is (starting or running),
// open all the same, for the Reconciler to find stale.
func (ru *run) cancelAttempt(wctx context.Context, f *flight) {
	f.abandoned = true
	f.cancel()
	var err error
	if ru.won {
		_, err = ru.m.Cancel(wctx, f.a.ID, "abandoned: attempt "+ru.winner.CompletedBy+" completed the job")
	} else {
		_, err = ru.m.MarkUnknown(wctx, f.a.ID, reasonAbandonedClosed)
	}
	if err != nil && !errors.Is(err, jobs.ErrInvalidTransition) && !errors.Is(err, jobs.ErrAttemptInFlight) {
		ru.logger.WarnContext(wctx, "failover: could not record an abandoned attempt", "attempt_id", f.a.ID, "error", err)
	}
}

// reasonAbandonedClosed is the reason recorded on an attempt whose call a
// Runner with AbandonLosers stopped waiting for once the job was closed.
const reasonAbandonedClosed = "abandoned: the job is closed; the provider may still act"
