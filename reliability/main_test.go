package reliability_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envChildRole); role != "" {
		os.Exit(runChild(role))
	}
	flag.Parse()
	limitRapid()
	code := m.Run()
	stopBouncer()
	jobstest.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// limitRapid keeps the model test's default run short enough for CI: 30
// random sequences per dialect unless -rapid.checks says otherwise.
func limitRapid() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "30")
	}
}

// dialect is one store under test.
type dialect struct {
	name string
	open func(t testing.TB) *jobs.SQLStore
}

func dialects() []dialect {
	return []dialect{
		{"sqlite", func(t testing.TB) *jobs.SQLStore { return jobstest.NewSQLite(t) }},
		{"postgres", func(t testing.TB) *jobs.SQLStore { return jobstest.NewPostgres(t) }},
	}
}

func postgresConfigured() bool {
	return os.Getenv(jobstest.EnvPostgresDSN) != "" || os.Getenv(jobstest.EnvRequirePostgres) == "1"
}

// allDialects adds PostgreSQL behind PgBouncer in transaction pooling mode.
func allDialects() []dialect {
	return append(dialects(), dialect{"pgbouncer", bouncerStore})
}

// retryStorage calls fn until it returns something other than a storage
// error, as a caller does after a timeout it cannot interpret, up to n times.
func retryStorage(n int, fn func() error) error {
	var err error
	for range n {
		if err = fn(); !errors.Is(err, jobs.ErrStorage) {
			return err
		}
	}
	return err
}

// assertInvariants fails t if the store breaks an invariant.
func assertInvariants(t testing.TB, s jobs.Store) *jobstest.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := jobstest.TakeSnapshot(ctx, s)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for _, v := range snap.Check() {
		t.Errorf("invariant violated: %s", v)
	}
	return snap
}
