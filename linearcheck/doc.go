// Package linearcheck checks histories recorded from a jobs.Store
// (package history) for linearizability, with porcupine, against a
// sequential specification of the Store contract (store.go in package
// jobs): whether every answer the store gave, to every client, in every
// process, is one that the contract allows for some order of the calls
// that respects real time (a call that returned before another began
// comes first).
//
//	h, err := history.Load(dir)
//	res := linearcheck.Check(h)
//	if !res.Ok() {
//		fmt.Print(res.Report()) // a trace of each violation
//		res.Visualize(f)        // porcupine's HTML
//	}
//
// # The specification
//
// Model is a sequential model of the store, one method at a time, as the
// contract states it: one job per owner and key; ReplaceJob's retirement
// of a key, refused while an attempt of the old job is starting, running
// or unknown, and not done when one has a dropped result;
// CreateAttempt's refusals (terminal job, an attempt in doubt, or running
// without Hedge), Seq, BaseVersion and the job moving to running;
// UpdateAttempt's guarded moves, its refusals (a claim taken over, a state
// the move does not start from, a provider reference already set, a
// second attempt in doubt) with the attempt as stored; CompleteAttempt's
// compare-and-swap and the loser's fate (lost, with DroppedReason naming
// the winner, or cancelled on a job closed without one) with the job and
// attempt after the call; CloseJob (giving up refused while an attempt is
// open); ClaimAttempt (open, in the state and at the update time read,
// not claimed beyond At) and RenewClaim; PurgeJobs; and the reads Job,
// JobByKey (a retired key included), Attempt, Attempts, and the records
// ListJobs, StaleAttempts and ListAttempts return. RecordLookup is
// checked for its refusals (ErrNotFound for no attempt) and changes
// nothing the model holds: the lookup it writes is read only by
// ReconcileStates, which is left out, as is CountJobs (a count across
// partitions); leaving a read out can hide a violation, never report one.
//
// Where the contract names two refusals that both apply and no order
// between them (a new attempt, or giving up, on a cancelled job whose
// attempt is still open; a completion presenting a claim taken over, on
// an attempt since resolved), either is accepted; where it names several
// blocking attempts, a refusal may name any of them.
//
// What is compared, in each answer: the outcome (success, or the typed
// refusal: its sentinel and the details its error type carries, the
// blocking attempt and its state, the job's state, the transition asked,
// the winner); and, where the contract says what comes back, the job (ID,
// owner, key, kind, provider, params, fingerprint, state, version,
// attempt count, result, winner, reason, ReplacedBy), the attempt (ID,
// job, Seq, provider, state, BaseVersion, hedge, provider reference,
// reason), created and claimed. JSON values are compared as values
// (member order and spacing aside); a nil json.RawMessage and JSON null
// are one, since a history records the first as the second.
//
// What is not compared: times (CreatedAt, UpdatedAt, ClosedAt,
// FinishedAt). They are the callers' own inputs, stored at the store's
// precision (microseconds in SQL, nanoseconds in memstore): comparing
// them would test a precision convention, not the order of effects. The
// model does keep them, from the inputs, where the contract depends on
// them: a claim needs the update time StaleAttempts read and a lease that
// has run out, and a purge deletes jobs closed before its cutoff. Where
// microsecond and nanosecond precision disagree, either answer is
// accepted. Nor are the error messages, an InputError's field, or the
// verifications (a table of their own, which no invariant ties to jobs).
//
// # Partitions
//
// The store never relates two jobs of different owners or keys, so the
// history is split by (owner, key): a partition holds every job ever
// created under one, its attempts, and every call on them. Each call
// names its partition by its arguments alone, since the caller chooses
// every ID before the store is called: a job's from the CreateJob or
// ReplaceJob that named it, an attempt's from the CreateAttempt that
// named it. Calls on IDs that no recorded call created form partitions of
// their own, in which nothing exists. Partitions are checked apart, in
// parallel; the verdict is linearizable if every one is.
//
// Three kinds of calls span partitions, and are checked in each as a
// relaxation (so that whatever is reported is a violation, but some
// violations across partitions are not seen):
//
//   - PurgeJobs is a call of every partition, which in each may delete any
//     subset of the jobs it may delete there (all of them terminal,
//     closed and created before the cutoff, with every attempt terminal),
//     up to its limit: its answer counts across partitions, so only "no
//     job deleted anywhere" and "at least as many as here" are checked,
//     and each partition may place the purge at a moment of its own. Past
//     10 purgeable jobs in one partition only the oldest-first subsets
//     are tried, and a violation found so is reported as undecided, not
//     as a violation. A purge that says it deleted nothing, a dry
//     run and a purge with a limit of zero delete nothing, and are left
//     out.
//   - ListJobs, StaleAttempts and ListAttempts are, in each partition, a read of the
//     records they returned from it, each of which must be the stored one
//     at one moment of the call; what they left out (limits, filters,
//     order) is not checked.
//
// # Ambiguity
//
// An ambiguous call (an error that is not one of the contract's
// refusals: jobs.ErrStorage, a context's error, anything else; a call
// without a return, its process killed; and CreateJobTx, whose job exists
// only if the caller's transaction commits) may have taken effect or not,
// at any moment after it was called: its return time is the end of time,
// and the model steps it both ways, taking effect (as the specification
// says it would in the state it meets) and not. Its answer is not
// compared. Three kinds of ambiguous calls are left out because leaving
// them out changes no verdict: a read (it changes nothing, and its answer
// is unknown), a RecordLookup (it changes nothing the model holds), and
// a create of a job whose ID no other call names (had it taken effect,
// whatever touched the key afterwards would name the job).
//
// An ambiguous create is patched when a later definite answer shows what
// it created: it returns when that answer returned (see returnBounds for
// why this changes no verdict).
//
// # Search
//
// Each partition is first searched for an order by witness (porcupine's
// search with one rule more: a call that may come next and leaves the
// state as it is, with its recorded answer, is placed at once), and the
// order found is checked against real time and the specification before
// it is believed. A partition with no such order is decided by porcupine,
// which also traces the violations.
//
// # Assumptions
//
// The history holds every call made to the store since it was empty,
// from every client; times come from one clock (time.Now on one
// machine); IDs are unique, as the Manager makes them; and a call's
// arguments are recorded (a json.RawMessage that is not JSON cannot be,
// and such a call is left out, counted in Result.Skipped).
package linearcheck
