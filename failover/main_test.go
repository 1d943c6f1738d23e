package failover_test

import (
	"log/slog"
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var discard = slog.New(slog.DiscardHandler)
