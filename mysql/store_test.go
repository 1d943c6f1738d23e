package mysql_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// TestConformance runs the whole conformance suite, every capability
// included, each case on a database of its own.
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(t testing.TB) jobs.Store { return openStore(t) })
}

func TestCapabilities(t *testing.T) {
	s := openStore(t)
	for name, has := range jobstest.Capabilities(s) {
		if !has {
			t.Errorf("the store is not a jobs.%s", name)
		}
	}
}
