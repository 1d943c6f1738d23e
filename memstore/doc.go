// Package memstore is an in-memory jobs.Store: a fast store for the unit
// tests of code that submits and runs jobs, and the model to copy when
// writing a store for another database.
//
// # In tests
//
// A Store needs no database, no file and no cleanup, and behaves as the
// SQL stores do: the same answers, the same errors, the same invariants.
//
//	store := memstore.New()
//	m, err := jobs.New(store, jobs.Options{Clock: clock})
//
// Runners, Reconcilers, Purge and Manager.Wait work over it as over any
// store (Wait is woken when the job closes, without polling). Nothing
// survives the process, and there is no transaction of the caller's to
// join: Manager.SubmitTx returns an error matching errors.ErrUnsupported.
//
// # For store authors
//
// The code is meant to be read beside the contract in jobs.Store, one
// method at a time: the files follow its sections (jobs, attempts,
// reconciliation, verifications, retention), and every guard says which
// clause of the contract it enforces. One mutex makes each method atomic,
// which a database does with unique constraints, guarded statements and
// transactions; the answers a store must give, and what it returns beside
// an error, are the same whatever does the enforcing.
//
// A store proves itself with the conformance suite in package jobstest,
// run from its own tests, as this package's tests run it:
//
//	func TestConformance(t *testing.T) {
//		jobstest.Run(t, func(t testing.TB) jobs.Store { return mystore.New(t) })
//	}
//
// The suite drives the store through jobs.Manager, releases goroutines
// together to race its writes, and checks the invariants after each case.
package memstore
