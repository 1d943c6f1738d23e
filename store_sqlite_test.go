package jobs_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

func TestSQLite(t *testing.T) {
	t.Parallel()
	jobstest.Run(t, func(t testing.TB) jobs.Store { return testdb.NewSQLite(t) })
}
