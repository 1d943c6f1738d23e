package linearcheck_test

import (
	"strings"
	"testing"

	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/linearcheck"
)

// TestRecordedStitchedRefusal checks a history that TestClaimsPostgres
// recorded from PostgresStore (the calls on one job, cut out of the run):
// a CompleteAttempt presenting a claim taken over was refused with
// ErrClaimLost, and returned the job as completed by the attempt beside
// the attempt still unknown, a pair that no state of the store ever held.
// The refusal is explained by reads made after the refused statement, one
// row at a time (the attempt, then the job, then the claim), while
// another reconciler's completion committed between them.
func TestRecordedStitchedRefusal(t *testing.T) {
	t.Parallel()
	h, err := history.Load("testdata/postgres-stitched-refusal")
	if err != nil {
		t.Fatal(err)
	}
	res := linearcheck.Check(h)
	t.Log(res.Summary())
	if res.Ok() || len(res.Violations) != 1 {
		t.Fatalf("want one violation:\n%s", res.Report())
	}
	trace := res.Violations[0].Trace
	for _, want := range []string{"refused ErrClaimLost", "attempt A1: State unknown; want succeeded"} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace does not say %q:\n%s", want, trace)
		}
	}
}
