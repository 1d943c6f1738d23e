package inspect_test

import (
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
