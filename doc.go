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
//	// In the HTTP handler: the same key always yields the same job.
//	job, created, err := m.Submit(ctx, jobs.SubmitRequest{
//		Owner: userID, Key: idempotencyKey,
//		Kind: "charge", Provider: "stripe", Params: body,
//	})
//
//	// In the worker, which receives job.ID:
//	a, err := m.StartAttempt(ctx, job.ID, "")        // refused if one is in doubt
//	ref, err := callProvider(ctx, job)                // your code
//	m.MarkRunning(ctx, a.ID, ref)                     // the provider acknowledged
//	job, err = m.Complete(ctx, a.ID, result)          // exactly one attempt wins
//
// # The model
//
// A [Job] is the durable record of what an owner wants: owner, idempotency
// key, kind (the operation), target provider and parameters, and a
// fingerprint of that intent. There is one job per (owner, key), forever.
// An [Attempt] is one try at fulfilling a job against one provider; retries
// and failovers are new attempts under the same job, never new jobs. Think of
// a print shop: the ticket is the job; the inkjet that jammed and the laser
// printer that printed are attempts 1 and 2. The customer pays once.
//
// [Manager.Submit] fingerprints kind, provider and params in canonical form
// (see [Canonicalize]): reordered keys and whitespace are the same intent,
// any changed value is not. The same key with another intent fails with
// [ErrKeyConflict] and names the existing job; nothing is written.
//
// # Attempt states
//
//	starting ──► running ──► succeeded | lost | failed | cancelled
//	    │           │
//	    └───────────┴──► unknown ──► succeeded | lost | failed | cancelled
//
// An attempt is recorded as starting before the provider is called, and
// becomes running when the provider acknowledges it ([Manager.MarkRunning],
// with the provider's reference). A timeout makes it unknown
// ([Manager.MarkUnknown]), never failed: the provider may still be working.
// [Manager.Complete], [Manager.Fail] and [Manager.Cancel] end it from
// starting, running or unknown. Terminal states never change; any other move
// is [ErrInvalidTransition] and writes nothing. Repeating a move that already
// happened (after a timeout on the caller's side, say) is not an error.
//
// An unknown attempt may still learn its reference: an acknowledgement that
// arrives after the timeout (MarkRunning on an unknown attempt) records the
// reference and leaves the attempt unknown, still in doubt, now with
// something a reconciler can look up ([EventReferenceRecorded]). A recorded
// reference never changes: the same one again is not an error, another one
// is ErrInvalidTransition and writes nothing.
//
// No new attempt starts while another attempt of the job is starting or
// unknown ([ErrAttemptInFlight] names it), nor while one is running unless
// hedging is asked for with [Hedge] or [Options.Hedging]. Hedging never
// passes a starting or unknown attempt.
//
// # Job states
//
//	pending ──► running ──► succeeded | failed | cancelled
//
// The first attempt makes a job running. Complete's compare-and-swap makes it
// succeeded; [Manager.FailJob] gives up on it (refused while an attempt is in
// flight); [Manager.CancelJob] closes it out of band at once. Terminal jobs
// accept no attempt ([ErrJobClosed]) and stay bound to their key: trying the
// same thing again after a failure is a new intent, with a new key.
//
// # Reusing a key after failure
//
// Some clients retry with the same key after a failure, and expect a new
// try rather than the failed job. [SubmitRequest.Reuse] opts in, per call:
// under [KeyReuseAfterFailure] the same intent submitted under the key of a
// failed job creates a new job under that key ([KeyReuseAfterFailureOrCancel]
// frees the key of a cancelled job too). The old job keeps its ID, state,
// attempts and outcome and is still read by [Manager.Get], with its original
// Key and [Job.ReplacedBy] naming the new job; [Manager.GetByKey] returns the
// new job, and [Manager.Replaced] the job it replaced. A job that is pending,
// running or succeeded keeps its key, and a different intent is still
// [ErrKeyConflict]: a key names one intent. Retiring the key and creating the
// new job is one atomic step of the store ([Store.ReplaceJob]); concurrent
// submits still make exactly one job. The default, [KeyReuseNever], is the
// rule above.
//
// # Exactly one winner
//
// Every attempt remembers the job version it started from. Complete writes
// the result only if the job is still at that version and has no winner,
// and increments the version; so of several racing attempts, the first to
// finish wins, whatever order they started in. Every later result is dropped
// (stored nowhere), its attempt becomes lost, the race is logged through
// [log/slog], and the caller gets [ErrLostRace] with the winner's ID in a
// [LostRaceError].
//
// # Errors
//
// Every error matches at most one sentinel with [errors.Is]: [ErrNotFound],
// [ErrKeyConflict], [ErrAttemptInFlight], [ErrLostRace],
// [ErrInvalidTransition], [ErrJobClosed], [ErrProviderUnverified],
// [ErrContractViolation], [ErrInvalidInput] or [ErrStorage]. Typed errors
// carry the details for [errors.As]: [KeyConflictError] (the existing job),
// [AttemptInFlightError] (the blocking attempt), [LostRaceError] (the
// winner), [TransitionError], [JobClosedError], [InputError] (the field) and
// [StorageError] (its kind: a [StorageConflict] from [Manager.SubmitTx] means
// roll your transaction back and run it again). Bad input is rejected before
// anything is written; an ID that no job or attempt can have is not found.
// No driver error type reaches the caller.
//
// # Stores
//
// [OpenSQLite] and [OpenPostgres] open a database and apply the schema;
// [NewSQLiteStore] and [NewPostgresStore] (and their SQLX variants) wrap a
// handle the caller already has; over stdlib.OpenDBFromPool(pool) the
// PostgreSQL store shares an application's pgxpool. Both stores satisfy
// [SQLStore]. [Manager.SubmitTx] submits inside the caller's *sql.Tx,
// [Manager.SubmitPgxTx] inside a pgx.Tx. The schema ships as plain SQL
// through [Migrations] and [MigrationsFor] for migration tools.
//
// [Store] is the whole contract between the Manager and a database, on one
// page (store.go): the Manager validates, fingerprints and runs the state
// machines, and a store only persists, enforcing the invariants atomically.
// Each SQL dialect lives in one file, store_postgres.go and store_sqlite.go,
// with the compare-and-swap of both side by side in cas.go. Package memstore
// is an in-memory reference store for unit tests and for authors of other
// stores, package jobstest the conformance suite every store runs, package
// faultstore a wrapper that injects faults, and package invariant the
// checker of a store's rows.
//
// OpenSQLite needs cgo (github.com/mattn/go-sqlite3). Built with
// CGO_ENABLED=0 the package still compiles, the PostgreSQL store works,
// and NewSQLiteStore serves a database opened with a pure-Go driver such as
// modernc.org/sqlite (tested with the whole conformance suite); OpenSQLite
// then returns an error.
//
// SQLite has one write lock per database. The writers of stores opened with
// OpenSQLite wait for it in a queue, first come, first served within a
// store and through an exclusive flock(2) on a file next to the database
// (its name followed by "-lock") across stores and processes, rather than
// polling SQLite for it; [ObserveWriteWait] reports each write's wait.
//
// # Performance
//
// Submit costs one round trip to PostgreSQL, for a new key and for a replay
// alike: one INSERT … ON CONFLICT DO NOTHING statement that also returns the
// existing row. StartAttempt is one statement, and Complete one round trip:
// the compare-and-swap and the attempt's fate, two statements sent together
// as one implicit transaction (one statement of common table expressions
// where pgx does not cache prepared statements). On SQLite,
// Submit looks the key up through a pool of readers before it queues for the
// single writer, so replays never wait for the write lock, and each
// connection keeps its prepared statements. After a run of new keys both
// stores try the plain insert first, which is cheaper for a new key, and
// after a run of replays PostgreSQL reads the key first, which is cheaper
// for a replay; a miss falls through to the statement that decides (a
// second round trip, at the turn of such a run). The bench module measures
// every verb beside hand-written SQL and River on both databases and writes
// a table and a chart:
//
//	cd bench && go run ./cmd/report
//
// # Safe failover
//
// Contracts. A contract per kind says what the business logic can interpret;
// Complete runs it before the compare-and-swap. A result that fails it marks
// the attempt failed, never reaches the job, and returns ErrContractViolation:
//
//	m, err := jobs.New(store, jobs.Options{Contracts: map[string]jobs.Contract{
//		"summarize": {Version: "v1", Validate: checkSummary}}})
//
// Verification. A provider other than the job's target is used for a kind
// with a contract only after a recorded, passing, unexpired verification at
// the current contract version; otherwise StartAttempt returns
// ErrProviderUnverified. A new Version invalidates older verifications:
//
//	v, err := m.VerifyProvider(ctx, "model-b", "summarize", roundTrip, jobs.ValidFor(24*time.Hour))
//
// Failover. A Runner of package failover calls the target first, then the
// fallbacks in order, and fails over only where it is safe:
//
//	what ended the attempt                 the Runner
//	Definitive error: the provider         records it failed, tries the next
//	  did nothing                            provider: safe
//	contract violation, unusable result    records it failed, tries the next
//	                                         provider: the provider did the work,
//	                                         so only for kinds without side
//	                                         effects, such as model calls
//	timeout (acknowledged or not), any     records it unknown, starts nothing
//	  other error, ctx cancelled             more: the Reconciler resolves it
//	HedgeAfter of silence                  hedges on a verified fallback, opt-in,
//	                                         only past a running attempt
//
// It moves on only past a failure it recorded itself: if someone else
// resolved the attempt while its call ran, Run stops and returns an error
// matching ErrInvalidTransition; if another attempt completed the job, Run
// returns it. Outcomes, the acknowledgement included, are recorded on a
// context detached from the caller's. Provider.Call should send [Attempt.ProviderKey]
// to the provider as its idempotency key: the reconciler looks an attempt up
// by it when no reference was recorded.
//
//	r := &failover.Runner{Manager: m, Providers: ps, Fallbacks: []string{"model-b"}, HedgeAfter: 10 * time.Second}
//	job, err := r.Run(ctx, jobID) // ErrAttemptInFlight: in doubt, left to the reconciler
//
// Once the job is won or closed by CancelJob, the calls still in flight run
// to their end and their outcomes are recorded (a late result is dropped,
// its attempt lost or cancelled), unless Runner.AbandonLosers cancels them
// (recording them cancelled on a won job, unknown on a closed one).
//
// Reconciliation. A Reconciler of package failover asks providers about unknown and stale
// attempts, by the reference recorded at running or else by the attempt's
// idempotency key ([Attempt.ProviderKey], which Provider.Call sends), and
// completes, fails or cancels them by the answer. Only evidence resolves an
// attempt in doubt, never the clock: pending answers and failed lookups are
// asked again, and an attempt whose provider cannot look it up
// (failover.ErrLookupUnsupported) is reported for an operator. Any number may run
// at once: each claims an attempt, with a token and a lease stored with it,
// before asking, and an answer whose claim was taken over is refused, so
// that each attempt is resolved once:
//
//	rec := &failover.Reconciler{Manager: m, Providers: ps, StaleAfter: 5 * time.Minute}
//	go rec.Run(ctx, 30*time.Second)
//
// # Retries and faults
//
// Every verb is safe to call again when its answer was lost (a connection
// dropped during COMMIT, a cancelled context, a killed process): a repeated
// Submit returns the same job, a repeated Complete by the winner returns the
// job and writes nothing (a loser gets ErrLostRace again, a result for a
// closed job ErrJobClosed again), and repeating a transition the attempt
// already made is not an error. A StartAttempt whose answer was lost leaves an
// attempt starting; the retry is refused with ErrAttemptInFlight naming it, so
// that it can be cancelled or resolved. Outcome writes are not abandoned when
// the caller's context ends (see Options.WriteTimeout).
//
// To test your own retry code, wrap a store with package faultstore, which
// fails calls before they run or after they commit, from a seed, and check the
// store afterwards with package invariant:
//
//	fs := faultstore.New(store, faultstore.Config{Seed: 1, Rate: 0.2, AfterShare: 0.5})
//	m, err := jobs.New(fs, jobs.Options{})
//	// … drive m, retrying on ErrStorage …
//	violations, err := invariant.Check(ctx, store)
//
// # PostgreSQL failover and PgBouncer
//
// Behind a standby with automatic failover, give OpenPostgres every node and
// ask for the primary, so that the pool and the listening connection of
// Wait both follow it:
//
//	postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write&connect_timeout=5
//
// Replicate synchronously (synchronous_commit on, the standby in the
// primary's synchronous_standby_names): then a job a caller was told
// exists, a completion and a lost race all survive the failover. Callers
// retry on ErrStorage with the same key or attempt, as after any timeout:
// a Complete whose commit was not acknowledged answers idempotently, and an
// attempt left starting or unknown goes to the Reconciler. With
// asynchronous replication the last acknowledged writes before a failover
// may be lost; the README has the table and the figures.
//
// Behind PgBouncer in transaction pooling mode, add
// default_query_exec_mode=exec to the pgx DSN. LISTEN cannot work through
// it: open the store with [ListenDSN] set to a direct connection, or Wait
// polls, and the Manager logs once at warning level that it does and why.
//
// # Waiting for a job
//
// [Manager.Wait] blocks until a job is succeeded, failed or cancelled, or
// until its context ends, when it returns the job as last read with
// ctx.Err():
//
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
//	defer cancel()
//	job, err := m.Wait(ctx, job.ID)
//	if errors.Is(err, context.DeadlineExceeded) { … job.State is still pending or running … }
//
// On PostgreSQL one connection per store, opened with the pool's settings
// but outside the pool and only while someone waits, LISTENs on
// jobs_closed, which the schema's trigger notifies when a job that a
// waiter registered for closes, and wakes that job's waiters at once. On SQLite, or while that connection is
// down, Wait polls with a backoff from 10ms to 1s; while the database is
// unreachable (a failover) it keeps waiting. A store opts in by
// implementing [CloseNotifier]. Package jobshttp offers the same over HTTP
// with Prefer: wait=N, and the Idempotency-Key header in front of Submit.
//
// # Retention
//
// A terminal job keeps its idempotency key for a retention period,
// Options.Retention ([DefaultRetention], 24 hours, by default). After that,
// [Manager.Purge] may delete it with its attempts, and the same key
// submitted again makes a new job. Jobs that are pending or running, and
// terminal jobs with an attempt still starting, running or unknown, are
// never purged. Purge deletes in bounded batches through the index on
// closed_at; on PostgreSQL it skips rows locked by others, so several
// purgers and the Submit/Complete traffic never wait for each other.
//
//	stop := m.StartPurger(ctx, jobs.PurgerOptions{Interval: 10 * time.Minute})
//	defer stop()
//	res, err := m.Purge(ctx, jobs.PurgeOptions{DryRun: true}) // count only
//
// # Schema versions
//
// The schema is a list of numbered migrations embedded in the package
// ([Migrations] returns them as plain SQL). Opening a store applies the
// missing ones in one transaction, under an advisory lock on PostgreSQL and
// an immediate transaction on SQLite, and records each in
// jobs_schema_migrations: processes starting together apply each migration
// once. A database whose schema is newer than the library is refused with
// an error matching ErrStorage whose StorageError has Kind StorageSchema.
// With your own migration tool, apply the files and open with
// [SkipMigrations], which only checks the version: each file records its
// own version in jobs_schema_migrations, whoever runs it. goose reads the
// files of [Migrations] as they are; golang-migrate those of
// MigrationsFor(dialect, GolangMigrate). There are no down migrations.
//
// # Observability
//
// Options.Observer receives an [Event] for every meaningful change: jobs
// created, replayed or in key conflict; attempts started, refused, running,
// unknown, succeeded, failed or cancelled; references learned late; races lost (with loser and
// winner); contract violations, verifications, reconciliations and purges.
// Each event carries the time spent in the store. It is called
// synchronously after the change is stored. Without an observer, events
// cost no allocation. Module github.com/intentjobs/jobs/otel turns events
// into OpenTelemetry metrics and spans:
//
//	obs, err := jobsotel.New()
//	m, err := jobs.New(store, jobs.Options{Observer: obs})
package jobs
