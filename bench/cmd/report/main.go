// Command report runs the benchmark suite of jobs beside hand-written SQL
// and River, on SQLite and PostgreSQL, and writes REPORT.md and ratios.svg.
//
//	cd bench && go run ./cmd/report
//
// PostgreSQL is found through JOBS_BENCH_POSTGRES_DSN, else
// JOBS_TEST_POSTGRES_DSN; the suite runs in a schema of its own, dropped at
// the end. Without either, only SQLite runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"time"

	"github.com/intentjobs/jobs/bench/report"
	"github.com/intentjobs/jobs/internal/perf"
)

func main() {
	cfg := report.DefaultConfig()
	out := flag.String("out", ".", "directory to write REPORT.md and ratios.svg to")
	flag.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of the whole suite; medians are taken over them")
	flag.DurationVar(&cfg.TrialTime, "trial", cfg.TrialTime, "aimed duration of one trial")
	flag.IntVar(&cfg.MinOps, "min-ops", cfg.MinOps, "fewest operations per trial")
	flag.IntVar(&cfg.MaxOps, "max-ops", cfg.MaxOps, "most operations per trial")
	flag.BoolVar(&cfg.SQLite, "sqlite", cfg.SQLite, "run on SQLite")
	flag.BoolVar(&cfg.River, "river", cfg.River, "include River")
	only := flag.String("only", "", "run only the workloads whose names match this regular expression")
	pg := flag.String("postgres", firstEnv("JOBS_BENCH_POSTGRES_DSN", "JOBS_TEST_POSTGRES_DSN"), "PostgreSQL DSN; empty to skip")
	flag.Parse()
	cfg.PostgresDSN = *pg
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report: -only:", err)
			os.Exit(2)
		}
		cfg.Workloads = slices.DeleteFunc(cfg.Workloads, func(w perf.Workload) bool { return !re.MatchString(w.Name) })
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	rep, err := report.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if err := rep.WriteFiles(*out, "cd bench && go run ./cmd/report"); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "wrote %s/REPORT.md and %s/ratios.svg in %v\n", *out, *out, time.Since(start).Round(time.Second))
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
