package reliability_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envChildRole); role != "" {
		os.Exit(runChild(role))
	}
	flag.Parse()
	limitRapid()
	code := m.Run()
	stopBouncer()
	code = testdb.AfterTests(code)
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
	open func(t testing.TB) jobs.SQLStore
}

func dialects() []dialect {
	return []dialect{
		{"sqlite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
		{"postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
	}
}

func postgresConfigured() bool {
	return os.Getenv(testdb.EnvPostgresDSN) != "" || os.Getenv(testdb.EnvRequirePostgres) == "1"
}

// allDialects adds PostgreSQL behind PgBouncer in transaction pooling mode.
func allDialects() []dialect {
	return append(dialects(), dialect{"pgbouncer", func(t testing.TB) jobs.SQLStore { return bouncerStore(t) }})
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
func assertInvariants(t testing.TB, s testdb.Store) *invariant.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := invariant.TakeSnapshot(ctx, s)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	for _, v := range snap.Check() {
		t.Errorf("invariant violated: %s", v)
	}
	return snap
}

// watchTransitions snapshots s every interval while a heavy test runs and
// checks, with invariant.CheckTransitions, that nothing moved backwards or
// left a terminal state between one snapshot and the next, nor between the
// last one and the end. Snapshots that fail for storage reasons (a test
// that kills connections) are skipped. Call the returned function when the
// load has stopped.
func watchTransitions(t *testing.T, s testdb.Store, interval time.Duration) (stop func()) {
	t.Helper()
	watch := watchSnapshots(s, interval)
	return func() {
		snapshots, vs, err := watch()
		for _, v := range vs {
			t.Errorf("transition: %s", v.Violation)
		}
		if err != nil {
			t.Errorf("snapshot: %v", err)
		}
		t.Logf("%d snapshots compared with CheckTransitions", snapshots)
	}
}

// timedViolation is a violation found between two snapshots, the first
// begun at from and the second ended at to.
type timedViolation struct {
	invariant.Violation
	from, to time.Time
}

// watchSnapshots snapshots s every interval until stop is called, and once
// more then, and compares each snapshot with the next with
// invariant.CheckTransitions. Snapshots that fail with ErrStorage are
// skipped; another error ends the watch. stop returns how many snapshots
// were taken, the violations, and that error.
func watchSnapshots(s testdb.Store, interval time.Duration) (stop func() (snapshots int, vs []timedViolation, err error)) {
	type timed struct {
		snap       *invariant.Snapshot
		start, end time.Time
	}
	take := func() (timed, error) {
		start := time.Now()
		snap, err := invariant.TakeSnapshot(context.Background(), s)
		return timed{snap, start, time.Now()}, err
	}
	var prev *timed
	var violations []timedViolation
	taken := 0
	compare := func(next timed) {
		if prev != nil {
			for _, v := range invariant.CheckTransitions(prev.snap, next.snap) {
				violations = append(violations, timedViolation{v, prev.start, next.end})
			}
		}
		prev = &next
		taken++
	}
	done, finished := make(chan struct{}), make(chan struct{})
	var failed error
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
			next, err := take()
			if errors.Is(err, jobs.ErrStorage) {
				continue
			}
			if err != nil {
				failed = err
				return
			}
			compare(next)
		}
	}()
	return func() (int, []timedViolation, error) {
		close(done)
		<-finished
		if failed != nil {
			return taken, violations, failed
		}
		// The load has stopped, but the pool may still hold connections
		// that a test killed while they were idle: each fails once, and is
		// dropped.
		last, err := take()
		for range 10 {
			if !errors.Is(err, jobs.ErrStorage) {
				break
			}
			last, err = take()
		}
		if err != nil {
			return taken, violations, fmt.Errorf("final snapshot: %w", err)
		}
		compare(last)
		return taken, violations, nil
	}
}
