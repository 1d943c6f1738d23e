// Package jobstest is the conformance suite for jobs.Store implementations.
// A store proves itself by running the suite from its own tests:
//
//	func TestMyStore(t *testing.T) {
//		jobstest.Run(t, func(t testing.TB) jobs.Store { return newMyStore(t) })
//	}
//
// Every case gets a fresh, empty store, runs in parallel with the others,
// and drives the store through the public jobs.Manager API, except where a
// Store method has no verb of its own (the claims of reconciliation, which
// it calls directly). Races are real: many goroutines released together on
// one job. The suite covers every method of jobs.Store, all of them
// required; it reads the whole store (ListJobs, Attempts) to see that
// refused calls wrote nothing, and ends most cases with the checker of
// package invariant.
//
// CreateJobTx is proved through Manager.SubmitTx when the store has a
// method DB() *sql.DB, as the SQL stores do: the suite opens transactions
// there, commits one and rolls the other back. A store without it must
// refuse SubmitTx with an error matching errors.ErrUnsupported, writing
// nothing.
//
// The suite's time is a Clock, a manual jobs.Clock that stands still until
// the test moves it; use it in your own tests too, to drive deadlines,
// claims and retention without sleeping. NewManager is jobs.New for tests.
package jobstest
