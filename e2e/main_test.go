package e2e

import (
	"testing"

	"github.com/intentjobs/jobs/jobstest"
)

func TestMain(m *testing.M) { jobstest.Main(m) }
