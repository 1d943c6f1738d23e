package jobshttp_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The jobstest harness keeps one administrative pool open for the whole
	// run; every store and server a test opens is closed by the test.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}
