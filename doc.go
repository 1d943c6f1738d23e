// Package jobs makes retries and failover safe: one user intent becomes
// exactly one durable job, however many times the request arrives and
// however many attempts it takes.
//
// A click stalls, the user clicks again; a retry loop or a fallback provider
// fires. Two requests now carry one intention. jobs records the intention
// once, under the client's idempotency key, and lets every later request find
// it instead of acting again. The database enforces it: a unique constraint
// on (owner, key), guarded updates, and a versioned compare-and-swap.
//
// # Quick start
//
//	store, err := jobs.OpenSQLite(ctx, "jobs.db") // or jobs.OpenPostgres(ctx, dsn)
//	if err != nil { … }
//	defer store.Close()
//	m, err := jobs.New(store, jobs.Options{})
//
//	// In the HTTP handler: the same owner and key always yield the same job.
//	job, created, err := m.Submit(ctx, jobs.SubmitRequest{
//		Owner: userID, Key: idempotencyKey,
//		Kind: "charge", Provider: "stripe", Params: body,
//	})
//
//	// In the worker, which receives job.ID:
//	a, err := m.StartAttempt(ctx, job.ID, "")    // refused while one is in doubt
//	ref, err := send(ctx, job, a.ProviderKey())   // your code; the key is the provider's idempotency key
//	m.MarkRunning(ctx, a.ID, ref)                 // the provider acknowledged
//	job, err = m.Complete(ctx, a.ID, result)      // exactly one attempt wins
//
// The guide, with code for every step and every error, is docs/guide.md in
// the repository; docs/ has a page per topic.
//
// # The model
//
// A [Job] is the durable record of what an owner wants: owner, idempotency
// key, kind (the operation), target provider and parameters, and a
// fingerprint of that intent. There is one job per (owner, key). An
// [Attempt] is one try at fulfilling a job against one provider; retries
// and failovers are new attempts under the same job, never new jobs. Think
// of a print shop: the ticket is the job; the inkjet that jammed and the
// laser printer that printed are attempts 1 and 2. The customer pays once.
//
// [Manager.Submit] fingerprints kind, provider and params in canonical form
// (see [Canonicalize]; [SubmitRequest.IntentFields] narrows it to some
// members of the params): reordered keys and whitespace are the same
// intent, any changed value is not. The same key with another intent fails
// with [ErrKeyConflict] and names the existing job; nothing is written.
// [Manager.SubmitTx] submits inside the caller's *sql.Tx, and
// [Manager.SubmitPgxTx] inside a pgx.Tx, so that the job commits with the
// caller's rows. [NewKind] gives a kind typed params and results.
//
// # Attempt states
//
//	starting ──► running ──► succeeded | lost | failed | cancelled
//	    │           │
//	    └───────────┴──► unknown ──► succeeded | lost | failed | cancelled
//
// An attempt is starting before the provider is called, and running once
// the provider acknowledges it ([Manager.MarkRunning], with the provider's
// reference). A timeout makes it unknown ([Manager.MarkUnknown]), never
// failed: the provider may still be working. [Manager.Complete],
// [Manager.Fail] and [Manager.Cancel] end it from starting, running or
// unknown. Terminal states never change; any other move is
// [ErrInvalidTransition] and writes nothing. Repeating a move that already
// happened is not an error. An acknowledgement that arrives after the
// timeout records the reference and leaves the attempt unknown
// ([EventReferenceRecorded]); a recorded reference never changes.
//
// No new attempt starts while another attempt of the job is starting or
// unknown ([ErrAttemptInFlight] names it), nor while one is running unless
// hedging is asked for with [Hedge] or [Options.Hedging]. Hedging never
// passes a starting or unknown attempt. An attempt on a provider other than
// the job's target is a failover: for a kind with a [Contract], it needs a
// provider whose verification passed ([Manager.VerifyProvider],
// [ErrProviderUnverified]).
//
// # Job states
//
//	pending ──► running ──► succeeded | failed | cancelled
//
// The first attempt makes a job running. Complete's compare-and-swap makes
// it succeeded; [Manager.FailJob] gives up on it (refused while an attempt
// is in flight); [Manager.CancelJob] closes it out of band at once. Terminal
// jobs accept no attempt ([ErrJobClosed]) and stay bound to their key until
// [Manager.Purge] removes them after the retention period. Under a
// [KeyReuse] policy ([SubmitRequest.Reuse]) the same intent may take the key
// of a failed or cancelled job for a new job, but never while an attempt of
// the old job may still act ([Store.ReplaceJob] decides it atomically).
//
// # Exactly one winner
//
// Every attempt remembers the job version it started from. Complete writes
// the result only if the job is still at that version and has no winner,
// and increments the version; so of several racing attempts, the first to
// finish wins, whatever order they started in. Every later result is
// dropped (stored nowhere), its attempt becomes lost with the reason
// [DroppedReason], the race is logged, and the caller gets [ErrLostRace]
// with the winner in a [LostRaceError]. A result for a job cancelled
// meanwhile is dropped too ([ReasonDroppedJobCancelled],
// [Attempt.ResultDropped], [EventResultDropped]). A result that fails its
// kind's [Contract] marks the attempt failed and never reaches the job
// ([ErrContractViolation]). cas.go explains how each dialect makes the
// compare-and-swap one atomic step.
//
// # Errors
//
// Every error matches at most one sentinel with [errors.Is]: [ErrNotFound],
// [ErrKeyConflict], [ErrAttemptInFlight], [ErrLostRace],
// [ErrInvalidTransition], [ErrJobClosed], [ErrProviderUnverified],
// [ErrContractViolation], [ErrInvalidInput] or [ErrStorage] ([ErrClaimLost]
// concerns reconcilers only). Typed errors carry the details for
// [errors.As]: [KeyConflictError] (the existing job),
// [AttemptInFlightError] (the blocking attempt), [LostRaceError] (the
// winner), [TransitionError], [JobClosedError], [InputError] (the field),
// [ProviderUnverifiedError], [ContractViolationError] and [StorageError]
// (its [StorageKind]: a [StorageConflict] from SubmitTx means roll the
// transaction back and run it again). Bad input is rejected before anything
// is written; an ID that no job or attempt can have is not found. No driver
// error type reaches the caller.
//
// Every verb is safe to call again when its answer was lost: a repeated
// Submit returns the same job, a repeated Complete by the winner returns
// the job and writes nothing, and repeating a transition the attempt
// already made is not an error. Outcome writes are not abandoned when the
// caller's context ends ([Options.WriteTimeout] bounds them).
//
// # Stores and capabilities
//
// [OpenSQLite] and [OpenPostgres] open a database and apply the schema;
// [NewSQLiteStore] and [NewPostgresStore] (and their SQLX variants) wrap a
// handle the caller already has. Options are typed per store
// ([SQLiteOption], [PostgresOption], and [StoreOption] for both), so that
// one store's option does not compile for the other. Both stores satisfy
// [SQLStore]. The tables are named intentjobs_…, beside the application's
// own; on PostgreSQL [Schema] puts them in a schema of their own. The
// schema ships as plain SQL through [Migrations] and [MigrationsFor], for
// migration tools, with [SkipMigrations]. OpenSQLite needs cgo; without it
// the package compiles, the PostgreSQL store works, and NewSQLiteStore
// serves a database opened with a pure-Go driver.
//
// [Store] is the core every store implements, on one page (store.go): the
// Manager validates, fingerprints and runs the state machines, and a store
// only persists, enforcing the invariants atomically. What only one
// feature needs is a capability, found by type assertion: [TxStore]
// (SubmitTx), [PgxTxStore] (SubmitPgxTx), [JobLister] (listing, for tools),
// [ClaimStore] (reconcilers), [VerificationStore] (verification),
// [PurgeStore] (retention), [CloseNotifier] ([Manager.Wait] without
// polling), and [JobCounter], [AttemptLister] and [LookupStore] (operators'
// tools: package inspect, the console). A feature whose store lacks its capability answers an error
// matching [errors.ErrUnsupported].
//
// # Other packages
//
// Package github.com/intentjobs/jobs/failover runs jobs through providers:
// its Runner fails over only to verified providers and only where that is
// safe, hedges on request, and its Reconciler resolves attempts in doubt,
// only with evidence. It builds on [Manager.CompleteClaimed],
// [Manager.Emit], [Manager.Options], [Manager.Now] and [SanitizeReason].
// Package jobshttp serves Submit behind the Idempotency-Key header.
// Package memstore is an in-memory store for tests and for authors of other
// stores; package jobstest is the conformance suite every store runs;
// package faultstore injects faults; package invariant checks a store's
// rows; package history records a store's calls for the linearizability
// checker of module github.com/intentjobs/jobs/linearcheck. Module
// github.com/intentjobs/jobs/otel turns the events of an [Observer] into
// OpenTelemetry metrics and spans, and cmd/jobsctl is the operator's CLI.
package jobs
