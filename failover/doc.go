// Package failover runs jobs of package jobs through providers, and fails
// over from one provider to another only where that is safe.
//
// A provider is a backend that can fulfil a job: an AI model behind an HTTP
// API, a payment processor, a printer. Another provider may carry out the
// same intent again, so moving on to it is safe only when the first one did
// nothing, or did nothing that matters. This package holds the two
// processes that keep to that rule over a [jobs.Manager]:
//
//   - a [Runner], the worker: it runs one job through its target provider,
//     then through its fallbacks in order, one attempt at a time;
//   - a [Reconciler], out of band: it resolves the attempts left in doubt,
//     and only with evidence.
//
// Everything they do goes through the Manager, which keeps the invariants:
// one attempt at a time, exactly one winner, no failover to a provider
// that is not verified for the job's kind (see [jobs.Manager.VerifyProvider]
// and [jobs.Contract]).
//
// # The Runner
//
// [Runner.Run] starts an attempt, calls its [Provider] and records what
// happened:
//
//   - a result is offered to the job ([jobs.Manager.Complete]): the first
//     that passes the kind's contract and wins the compare-and-swap is the
//     job's;
//   - an error made with [Definitive] means the provider did nothing: the
//     attempt fails and the next provider is tried;
//   - a result that breaks the contract, or is not JSON, fails the attempt
//     too, and the next provider is tried: the provider did the work, so
//     this is safe only for kinds without side effects, such as model calls;
//   - a timeout, any other error, or the caller giving up leaves the
//     attempt unknown: the provider may still be working, so nothing more
//     starts until a Reconciler resolves it;
//   - hedging, a second attempt on the next fallback after a silence of
//     [Runner.HedgeAfter], happens only when asked for, and only past an
//     attempt the provider acknowledged.
//
// A fallback is used only once [jobs.Manager.CheckFailover] passes: for a
// kind with a contract, its provider needs a recorded, passing
// verification. Every outcome is recorded on a context detached from the
// caller's, so that what a provider said as the caller gave up is kept.
//
// # The Reconciler
//
// [Reconciler.ReconcileOnce] finds the attempts in doubt (unknown ones, and
// starting or running ones nobody has touched for a while: their worker
// crashed), asks each one's provider what became of its request
// ([Provider.Lookup], by the reference recorded when the provider
// acknowledged it, else by [jobs.Attempt.ProviderKey], the idempotency key
// the request carried) and completes, fails or cancels the attempt by the
// answer. The passing of time never resolves an attempt: while the provider
// answers pending, or cannot be asked, the attempt stays in doubt. Any
// number of reconcilers may run at once; each claims an attempt before
// asking (the store must be a [jobs.ClaimStore]), so that each attempt is
// resolved once.
//
// # Example
//
//	providers := map[string]failover.Provider{"model-a": modelA, "model-b": modelB}
//	r := &failover.Runner{Manager: m, Providers: providers, Fallbacks: []string{"model-b"}}
//	job, err := r.Run(ctx, jobID)
//	switch {
//	case err == nil:
//		// job.Result is the result
//	case errors.Is(err, jobs.ErrAttemptInFlight):
//		// an attempt is in doubt: the reconciler resolves it
//	case errors.Is(err, failover.ErrNoProviderLeft):
//		// every provider failed: give up with m.FailJob, or try later
//	}
//
//	rec := &failover.Reconciler{Manager: m, Providers: providers}
//	go rec.Run(ctx, 30*time.Second)
//
// # Errors
//
// [ErrNoProviderLeft]: a Runner tried every eligible provider and none
// produced a result; the job stays open. [ErrLookupUnsupported]: what a
// Provider's Lookup returns when it cannot say what became of a request;
// the attempt waits for an operator. [Runner.Run] also returns the errors
// of package jobs that explain why it stopped: [jobs.ErrAttemptInFlight],
// [jobs.ErrJobClosed], [jobs.ErrInvalidTransition]. A Reconciler over a
// store without claims returns an error matching [errors.ErrUnsupported].
//
// Hedges and reconciliations are reported to the Manager's Observer, in
// the same stream as its own events: [EventHedgeStarted],
// [EventAttemptReconciled], [EventAttemptNeedsOperator].
package failover
