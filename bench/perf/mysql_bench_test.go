package perf_test

import (
	"context"
	"testing"
	"time"

	"github.com/intentjobs/jobs/bench/perf"
)

// BenchmarkMySQL runs every workload of the suite on MySQL or MariaDB
// (JOBS_TEST_MYSQL_DSN), as BenchmarkPostgres does on PostgreSQL: the
// hand-written SQL on its lean schema ("sql"), the MySQL store ("jobs",
// with x-baseline and x-allocs), and for Complete the transaction of
// four statements ("sql-tx"), each in a database of its own:
//
//	cd bench && JOBS_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test' go test ./perf -run '^$' -bench MySQL -benchtime 200x
func BenchmarkMySQL(b *testing.B) {
	for _, w := range perf.Suite() {
		b.Run(w.Name, func(b *testing.B) {
			ctx := context.Background()
			var contenders []perf.Lifecycle
			for _, style := range []perf.CompleteStyle{perf.CompleteInOneStatement, -1, perf.CompleteInTransaction} {
				var c perf.Lifecycle
				var err error
				if style < 0 {
					c, err = perf.OpenMySQLLibrary(ctx, perf.MySQLDatabase(b))
				} else {
					c, err = perf.OpenMySQLBaseline(ctx, perf.MySQLDatabase(b), style)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close() })
				contenders = append(contenders, c)
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
