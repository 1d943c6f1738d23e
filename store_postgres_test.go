package jobs_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	jobstest.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store { return jobstest.NewPostgres(t) })
}
