package testdb

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests, releases what this package keeps between
// tests, and fails the run if a goroutine leaked. Use it as TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
func Main(m *testing.M) {
	os.Exit(AfterTests(m.Run()))
}

// AfterTests is Main's second half, for a TestMain that does more: given
// m.Run's exit code, it calls Cleanup, checks for leaked goroutines
// (go.uber.org/goleak) when the tests passed, and returns the exit code to
// use.
func AfterTests(code int) int {
	Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
