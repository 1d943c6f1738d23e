package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The jobstest harness keeps one administrative pool open for the whole
	// run; every store, server and browser a test opens is closed by the test.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}
