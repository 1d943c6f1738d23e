package jobstest

import (
	"testing"

	"github.com/intentjobs/jobs"
)

// Run runs the conformance suite. newStore must return a new, empty store
// each time it is called, cleaned up when t ends. The store must be a
// jobs.JobLister as well as a jobs.Store: the suite reads everything it
// stored to see that refused calls wrote nothing and that the invariants
// hold. The cases of every other capability run where the store has it
// (see Capabilities).
func Run(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	probe := newStore(t)
	if _, ok := probe.(jobs.JobLister); !ok {
		t.Fatalf("jobstest: a %T is not a jobs.JobLister: the suite reads every job it stored to check the invariants", probe)
	}
	has := Capabilities(probe)
	for _, c := range cases {
		if c.needs != "" && !has[c.needs] {
			t.Run(c.name, func(t *testing.T) { t.Skipf("the store is not a jobs.%s", c.needs) })
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore)
		})
	}
}

// Capabilities reports which of the optional interfaces of package jobs
// the store implements, by name ("TxStore", "ClaimStore", …): the cases of
// each run only where it is true.
func Capabilities(s jobs.Store) map[string]bool {
	_, tx := s.(jobs.TxStore)
	_, lister := s.(jobs.JobLister)
	_, claims := s.(jobs.ClaimStore)
	_, verifications := s.(jobs.VerificationStore)
	_, purge := s.(jobs.PurgeStore)
	_, notifier := s.(jobs.CloseNotifier)
	_, counter := s.(jobs.JobCounter)
	_, attempts := s.(jobs.AttemptLister)
	_, lookups := s.(jobs.LookupStore)
	return map[string]bool{"TxStore": tx, "JobLister": lister, "ClaimStore": claims,
		"VerificationStore": verifications, "PurgeStore": purge, "CloseNotifier": notifier,
		"JobCounter": counter, "AttemptLister": attempts, "LookupStore": lookups}
}

// cases are the suite's cases, each with the capability it needs, if any:
// Run skips a case whose capability the store lacks, saying which.
var cases = []struct {
	name  string
	needs string
	fn    func(t *testing.T, newStore func(t testing.TB) jobs.Store)
}{
	{"DoubleClick", "", testDoubleClick},
	{"AfterNewKeys", "", testAfterNewKeys},
	{"AfterReplays", "", testAfterReplays},
	{"SameIntent", "", testSameIntent},
	{"KeyConflict", "", testKeyConflict},
	{"KeyReuse", "", testKeyReuse},
	{"OwnersAreSeparate", "", testOwnersAreSeparate},
	{"InvalidInput", "", testInvalidInput},
	{"CancelledContext", "", testCancelledContext},
	{"NotFound", "", testNotFound},
	{"StartAttemptRules", "", testStartAttemptRules},
	{"StartAttemptRace", "", testStartAttemptRace},
	{"TimeoutBlocksUntilResolved", "", testTimeoutBlocks},
	{"FinishingOrderDecides", "", testFinishingOrder},
	{"CompleteRace", "", testCompleteRace},
	{"CancelRacesComplete", "", testCancelRacesComplete},
	{"CompleteReturnsRows", "", testCompleteReturnsRows},
	{"AttemptTransitions", "", testAttemptTransitions},
	{"JobTransitions", "", testJobTransitions},
	{"RetrySafety", "", testRetrySafety},
	{"OneAttemptInDoubt", "", testOneInDoubt},
	{"MarkUnknownRacesHedge", "", testMarkUnknownRacesHedge},
	{"UnknownAttemptLearnsReference", "", testUnknownLearnsReference},
	{"ReferenceRace", "", testReferenceRace},
	{"Reads", "", testReads},
	{"StoreRefusals", "", testStoreRefusals},
	{"ClaimRefusals", "ClaimStore", testClaimRefusals},
	{"ListJobs", "JobLister", testListJobs},
	{"SubmitTx", "", testSubmitTx}, // on a store that is no TxStore, SubmitTx must be refused
	{"Verification", "VerificationStore", testVerification},
	{"Purge", "PurgeStore", testPurge},
	{"PurgeRetired", "PurgeStore", testPurgeRetired},
	{"Reconcile", "ClaimStore", testReconcile},
	{"CountJobs", "JobCounter", testCountJobs},
	{"ListAttempts", "AttemptLister", testListAttempts},
	{"Lookups", "LookupStore", testLookups},
}
