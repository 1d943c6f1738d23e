package jobs_test

import (
	"log/slog"
	"testing"

	"github.com/intentjobs/jobs/jobstest"
)

func TestMain(m *testing.M) { jobstest.Main(m) }

var discard = slog.New(slog.DiscardHandler)
