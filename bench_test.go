package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/intentjobs/jobs/internal/perf"
	"github.com/intentjobs/jobs/jobstest"
)

// The benchmarks run every workload of the suite twice in the same process
// on the same database: first as hand-written SQL ("sql"), then through the
// library ("jobs"), which also reports x-baseline, its throughput as a
// multiple of the baseline's. Each checks what it wrote (one job per key,
// every storm caller the same ID, exactly one winner per race) and fails on
// any violation. They run only with -bench:
//
//	go test -run '^$' -bench . -benchmem
//	go test -run '^$' -bench 'Postgres/submit-new' -benchmem -count 5
//
// The report command of the bench module runs the same workloads several
// times, interleaved, and writes medians and a chart.

func BenchmarkSQLite(b *testing.B)   { benchmarkSuite(b, "sqlite") }
func BenchmarkPostgres(b *testing.B) { benchmarkSuite(b, "postgres") }

func benchmarkSuite(b *testing.B, dialect string) {
	for _, w := range perf.Suite() {
		b.Run(w.Name, func(b *testing.B) {
			e := openEnv(b, dialect)
			if w.Kind == perf.SubmitStored {
				start := time.Now()
				if err := e.FillTo(context.Background(), w.Stored); err != nil {
					b.Fatal(err)
				}
				b.Logf("prefilled %d jobs in %v", w.Stored, time.Since(start).Round(time.Millisecond))
			}
			var baseline time.Duration // per operation
			for _, c := range []perf.Contender{perf.NewBaseline(e), perf.NewLibrary(e)} {
				b.Run(c.Name(), func(b *testing.B) {
					perOp := runTrial(b, e, w, c)
					if c.Name() == "sql" {
						baseline = perOp
					} else if baseline > 0 && perOp > 0 {
						b.ReportMetric(float64(baseline)/float64(perOp), "x-baseline")
					}
				})
			}
		})
	}
}

// runTrial measures b.N operations of w by c and returns the time per
// operation.
func runTrial(b *testing.B, e *perf.Env, w perf.Workload, c perf.Contender) time.Duration {
	ctx := context.Background()
	t, err := perf.Prepare(ctx, e, w, c, b.N)
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
	if e.Dialect == "postgres" {
		b.ReportMetric(r.RoundTripsPerOp(), "roundtrips/op")
	}
	return r.Elapsed / time.Duration(r.Ops)
}

func openEnv(tb testing.TB, dialect string) *perf.Env {
	tb.Helper()
	ctx := context.Background()
	var e *perf.Env
	var err error
	if dialect == "postgres" {
		e, err = perf.OpenPostgres(ctx, jobstest.PostgresDSN(tb))
	} else {
		e, err = perf.OpenSQLite(ctx, tb.TempDir())
	}
	if err != nil {
		tb.Fatalf("open %s: %v", dialect, err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}
