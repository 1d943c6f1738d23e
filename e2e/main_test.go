package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/intentjobs/jobs/jobstest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jobstest.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
