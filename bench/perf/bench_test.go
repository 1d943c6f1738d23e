package perf_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentjobs/jobs/bench/perf"
	"github.com/intentjobs/jobs/internal/testdb"
)

// The benchmarks run every workload of the suite in the same process, each
// contender in a database of its own with the same settings: first the
// hand-written SQL on its own lean schema ("sql"), then the library
// ("jobs"), which also reports x-baseline, its throughput as a multiple of
// the baseline's, and x-allocs, its allocations as a multiple of the
// baseline's; Complete also runs the four-statement baseline ("sql-tx").
// SQLite runs at synchronous=FULL (what OpenSQLite uses) and at NORMAL. Each
// trial checks what it wrote (one job per key, every storm caller the same
// ID, exactly one winner per race, which keeps its result) and fails on any
// violation. They run only with -bench, from the bench module:
//
//	cd bench && go test ./perf -run '^$' -bench . -benchmem
//	cd bench && go test ./perf -run '^$' -bench 'Postgres/submit-new' -benchmem -count 5
//	cd bench && go test ./perf -run '^$' -bench . -benchtime 200x    # a short check that every workload runs
//
// The report command (cmd/report) runs the same workloads several times,
// interleaved, and writes medians and a chart.

func BenchmarkSQLite(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) { benchmarkSuite(b, perf.SQLite, sync) })
	}
}

func BenchmarkPostgres(b *testing.B) { benchmarkSuite(b, perf.Postgres, "") }

func benchmarkSuite(b *testing.B, dialect, sync string) {
	for _, w := range perf.Suite() {
		b.Run(w.Name, func(b *testing.B) {
			ctx := context.Background()
			contenders := []perf.Lifecycle{
				openBaseline(b, dialect, sync, perf.CompleteInOneStatement),
				openLibrary(b, dialect, sync),
				openBaseline(b, dialect, sync, perf.CompleteInTransaction),
			}
			var baseline *perf.Result
			for _, c := range contenders {
				if !c.Runs(w) {
					continue
				}
				if w.Kind == perf.SubmitStored {
					start := time.Now()
					if err := c.Tables().FillTo(ctx, w.Stored); err != nil {
						b.Fatal(err)
					}
					b.Logf("%s: prefilled %d jobs in %v", c.Name(), w.Stored, time.Since(start).Round(time.Millisecond))
				}
				b.Run(c.Name(), func(b *testing.B) {
					r := runTrial(b, w, c)
					if c.Name() == "sql" {
						baseline = r
					} else if baseline != nil && r.OpsPerSec() > 0 {
						b.ReportMetric(r.OpsPerSec()/baseline.OpsPerSec(), "x-baseline")
						b.ReportMetric(r.AllocsPerOp()/baseline.AllocsPerOp(), "x-allocs")
					}
				})
			}
		})
	}
}

// runTrial measures b.N operations of w by c.
func runTrial(b *testing.B, w perf.Workload, c perf.Contender) *perf.Result {
	ctx := context.Background()
	t, err := perf.Prepare(ctx, w, c, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	r := t.Run(ctx)
	b.StopTimer()
	t.Check(ctx)
	if r.Violations > 0 {
		b.Fatalf("%d violations (%d busy), e.g. %v", r.Violations, r.Busy, r.Problems)
	}
	b.ReportMetric(float64(r.Percentile(50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(r.Percentile(99).Microseconds()), "p99-µs")
	if c.RoundTrips() > 0 {
		b.ReportMetric(r.RoundTripsPerOp(), "roundtrips/op")
	}
	return r
}

// newDatabase returns a database of its own for one contender: a fresh
// PostgreSQL schema, or a new SQLite file.
func newDatabase(tb testing.TB, dialect, sync string) perf.Database {
	tb.Helper()
	if dialect == perf.Postgres {
		return perf.Database{Dialect: perf.Postgres, DSN: testdb.PostgresDSN(tb)}
	}
	return perf.Database{Dialect: perf.SQLite, DSN: filepath.Join(tb.TempDir(), "bench.db"), Synchronous: sync}
}

func openLibrary(tb testing.TB, dialect, sync string) *perf.Library {
	tb.Helper()
	l, err := perf.OpenLibrary(context.Background(), newDatabase(tb, dialect, sync))
	if err != nil {
		tb.Fatalf("open %s: %v", dialect, err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

func openBaseline(tb testing.TB, dialect, sync string, style perf.CompleteStyle) *perf.Baseline {
	tb.Helper()
	bl, err := perf.OpenBaseline(context.Background(), newDatabase(tb, dialect, sync), style)
	if err != nil {
		tb.Fatalf("open %s: %v", dialect, err)
	}
	tb.Cleanup(func() { bl.Close() })
	return bl
}
