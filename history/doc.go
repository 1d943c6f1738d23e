// Package history records what a jobs.Store was asked and what it
// answered, as a history of operations that a linearizability checker can
// read back: which client called which method with which request, what
// came back, and when the call began and ended.
//
// # Recording
//
// Wrap each store a test drives, once per actor, and give every wrapper of
// one process the same Sink:
//
//	sink, err := history.NewSink(dir) // one file per Sink, in the run's directory
//	defer sink.Close()
//	store := history.Record(inner, sink, "worker-1")
//	m, err := jobs.New(store, jobs.Options{})
//
// Record returns a store with exactly the capabilities of the one it wraps
// (TxStore, JobLister, ClaimStore, VerificationStore, PurgeStore,
// CloseNotifier, LookupStore, JobCounter, AttemptLister), so that the Manager, Reconcilers and Purgers behave as
// over the inner store. PgxTxStore is the one capability it does not
// carry: its method takes a pgx.Tx, and this package depends on nothing
// but the standard library and the root package; SubmitPgxTx over a
// recorded store answers errors.ErrUnsupported.
//
// A history is meant to hold every call made to the store from the moment
// it was empty: a write by an unrecorded client makes the recorded answers
// look impossible. Several processes (each with its own Sink, all in one
// directory) record one history: times come from time.Now().UnixNano(),
// the wall clock that every process on a machine shares.
//
// # Outcomes
//
// Each answer is classified from its error with errors.Is:
//
//   - ok: no error; the results are definite.
//   - refused: a definite answer of the contract that wrote nothing:
//     jobs.ErrNotFound, ErrKeyConflict, ErrAttemptInFlight, ErrJobClosed,
//     ErrInvalidTransition, ErrLostRace, ErrClaimLost or ErrInvalidInput.
//     The typed error's details (the blocking attempt, the winner, the
//     state found) are recorded. ErrLostRace and a CompleteAttempt's
//     ErrJobClosed are refusals of the compare-and-swap whose loser's
//     attempt the store did move; the results say how.
//   - ambiguous: anything else (jobs.ErrStorage of any kind, a context's
//     error, an unexpected error): the write may or may not have happened.
//
// A call that never returned (its process was killed) has a call line and
// no return line; Load reports it as ambiguous, with Returned false.
//
// # File format
//
// A run is a directory; each Sink writes one file in it, named
// <host>-<pid>-<nonce>.jsonl, of JSON objects one per line, written with
// one write(2) each, so that a process killed at any moment leaves whole
// lines behind (Load ignores a last line without its newline). The first
// line names the format and the process:
//
//	{"format":"jobs-history/1","process":"h1-4242-5f3a","host":"h1","pid":4242,"started":1700000000000000000}
//
// Then, for each call, a call line before the store is called and a
// return line after it answered, matched by op, a number unique within
// the file:
//
//	{"ev":"call","op":7,"client":"worker-1","method":"CompleteAttempt","time":1700000000012345678,
//	 "args":{"completion":{"AttemptID":"att_…","Result":{"n":1},"At":"…","ClaimToken":""}}}
//	{"ev":"return","op":7,"time":1700000000013456789,"outcome":"refused",
//	 "results":{"job":{…},"attempt":{…}},
//	 "error":{"message":"jobs: job … lost …","sentinel":"ErrLostRace","lost_race":{"JobID":"…","AttemptID":"…","WinnerID":"…"}}}
//
// args holds the method's arguments by name (Args), the request structs
// whole; results holds what the method returned beside its error, even
// with an error (Results); a zero value is left out. time is Unix
// nanoseconds. An argument that cannot be encoded (a json.RawMessage that
// is not JSON) leaves args out and says why in args_error.
//
// Load reads every *.jsonl file of a directory back into one History;
// Runs finds the run directories under a root.
package history
