package jobshttp_test

import (
	"testing"

	"github.com/intentjobs/jobs/jobstest"
)

func TestMain(m *testing.M) { jobstest.Main(m) }
