package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

// The demo is part of the documentation: keep it running.
func TestDemoPostgres(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	var out bytes.Buffer
	if err := run(&out, dsn); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lost", "contract v1 violated", "refused", "unknown -> succeeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMain(m *testing.M) { testdb.Main(m) }

func Example() {
	if err := run(os.Stdout, ""); err != nil {
		fmt.Println(err)
	}
	// Output:
	// Store: SQLite, in a temporary directory
	//
	// 1. Verification: a fallback must prove it speaks the contract before it is used.
	//    fast-model: passed contract v1; eligible for failover until tomorrow
	//    sloppy-model: failed — contract v1 violated: not a summary: json: unknown field "text"
	//    2 verifications recorded in the store
	//
	// 2. Hedging: slow-model acknowledges but stays silent, so after 100 ms the runner
	//    hedges on fast-model. fast-model departs second and finishes first: it wins.
	//    attempt 1 on slow-model: lost — its result arrived second and was dropped
	//    attempt 2 on fast-model (hedge): succeeded — its result is the job's
	//    job result: {"summary":"Rates rise; markets shrug."}
	//
	// 3. A contract violation: sloppy-model answers at once, "successfully", with the wrong JSON.
	//    The result never reaches the job; the runner fails over to a verified model.
	//    attempt 1 on sloppy-model: failed — contract v1 violated: not a summary: json: unknown field "text"
	//    attempt 2 on fast-model: succeeded — its result is the job's
	//    job result: {"summary":"Rates rise; markets shrug."}
	//    And the other way round: failing over to sloppy-model is refused.
	//    StartAttempt(sloppy-model): refused, its last verification failed: contract v1 violated: not a summary: json: unknown field "text"
	//
	// 4. A timeout: slow-model gets only 50 ms. The attempt becomes unknown, not failed,
	//    and nothing else starts until the reconciler asks slow-model what happened.
	//    Run: the attempt is unknown; the job is in doubt
	//    Run again: refused, no second request is sent
	//    Reconciler: slow-model said the request finished; attempt unknown -> succeeded
	//    attempt 1 on slow-model: succeeded — its result is the job's
	//    job result: {"summary":"Rates rose and markets did not react."}
	//
	// Done: every job has one result, from a provider whose output passed the contract.
}
