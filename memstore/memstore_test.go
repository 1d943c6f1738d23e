package memstore_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestConformance proves the store with the suite every store runs.
func TestConformance(t *testing.T) {
	jobstest.Run(t, func(t testing.TB) jobs.Store { return memstore.New() })
}
