package jobs_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store { return testdb.NewPostgres(t) })
}
