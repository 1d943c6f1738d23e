// Package jobstest is the conformance suite for jobs.Store implementations.
// A store proves itself by running the suite from its own tests:
//
//	func TestMyStore(t *testing.T) {
//		jobstest.Run(t, func(t testing.TB) jobs.Store { return newMyStore(t) })
//	}
//
// Every case gets a fresh, empty store, runs in parallel with the others,
// and drives the store through the public jobs.Manager API, except where it
// proves that a store refuses what the Manager would never ask of it
// (StoreRefusals, ClaimRefusals) or where a method has no verb of its own
// (the claims of reconciliation). Races are real: many goroutines released
// together on one job.
//
// # What a store must have
//
// The core jobs.Store, and jobs.JobLister: the suite itself reads every job
// a case stored (with ListJobs and Attempts) to see that refused calls
// wrote nothing, and ends most cases with the checker of package
// invariant; the case ListJobs proves its filters, orders and pages. Run
// fails at once on a store that is no JobLister.
//
// # Capabilities
//
// Every other capability is optional. Run asks the store which it has
// (see Capabilities) and runs a capability's cases only where the store
// has it; on a store without it, each of those cases is skipped with a
// message naming the capability:
//
//   - ClaimStore: Reconcile (stale attempts, racing claims, leases,
//     take-overs) and ClaimRefusals (claims without a token, claims of
//     closed attempts).
//   - VerificationStore: Verification (the failover rule).
//   - PurgeStore: Purge and PurgeRetired (retention, and a reused key's
//     old job).
//   - TxStore: SubmitTx runs on every store. On a TxStore it proves
//     CreateJobTx through Manager.SubmitTx, in transactions it opens on
//     the store's method DB() *sql.DB, as the SQL stores have (a TxStore
//     without one has the case skipped): one commits, one rolls back, and
//     a key reuse policy is refused inside. A store that is no TxStore must
//     refuse SubmitTx with an error matching errors.ErrUnsupported,
//     writing nothing.
//
// Every other case needs the core alone.
//
// # Histories
//
// When JOBS_HISTORY_DIR is set, every case records each call it makes to
// its store, from every goroutine, as a history in a run directory of
// its own under that directory (see Recorder), and module linearcheck's
// TestHistories checks each for linearizability against the Store
// contract. A store that runs the suite has its histories recorded with
// nothing more to write; its own concurrent tests record theirs with
// NewRecorder.
//
// The suite's time is a Clock, a manual jobs.Clock that stands still until
// the test moves it; use it in your own tests too, to drive deadlines,
// claims and retention without sleeping. NewManager is jobs.New for tests.
package jobstest
