package reliability_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"testing"
	"time"

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
	code = jobstest.AfterTests(code)
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

// watchTransitions snapshots s every interval while a heavy test runs and
// checks, with jobstest.CheckTransitions, that nothing moved backwards or
// left a terminal state between one snapshot and the next, nor between the
// last one and the end. Snapshots that fail for storage reasons (a test
// that kills connections) are skipped. Call the returned function when the
// load has stopped.
func watchTransitions(t *testing.T, s jobs.Store, interval time.Duration) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	finished := make(chan struct{})
	var prev *jobstest.Snapshot
	snapshots := 0
	compare := func(next *jobstest.Snapshot) {
		if prev != nil {
			for _, v := range jobstest.CheckTransitions(prev, next) {
				t.Errorf("transition: %s", v)
			}
		}
		prev = next
		snapshots++
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			snap, err := jobstest.TakeSnapshot(context.Background(), s)
			if errors.Is(err, jobs.ErrStorage) {
				continue
			}
			if err != nil {
				t.Errorf("snapshot: %v", err)
				return
			}
			compare(snap)
		}
	}()
	return func() {
		close(done)
		<-finished
		snap, err := jobstest.TakeSnapshot(context.Background(), s)
		if err != nil {
			t.Errorf("final snapshot: %v", err)
			return
		}
		compare(snap)
		t.Logf("%d snapshots compared with CheckTransitions", snapshots)
	}
}
