// Command report runs the benchmark suite of jobs beside hand-written SQL
// on a lean schema of its own, and River, on SQLite (at synchronous=FULL and
// at NORMAL) and PostgreSQL, and writes REPORT.md and ratios.svg from that
// one run.
//
//	cd bench && go run ./cmd/report
//	cd bench && go run ./cmd/report -runs 2 -trial 200ms -out /tmp   # a short run, to check the pipeline
//
// PostgreSQL is found through JOBS_BENCH_POSTGRES_DSN, else
// JOBS_TEST_POSTGRES_DSN; every contender runs in a schema of its own,
// dropped at the end. Without either, only SQLite runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs/bench/perf"
	"github.com/intentjobs/jobs/bench/report"
)

func main() {
	cfg := report.DefaultConfig()
	out := flag.String("out", ".", "directory to write REPORT.md and ratios.svg to")
	flag.IntVar(&cfg.Runs, "runs", cfg.Runs, "runs of the whole suite; medians are taken over them")
	flag.DurationVar(&cfg.TrialTime, "trial", cfg.TrialTime, "aimed duration of one trial")
	flag.IntVar(&cfg.MinOps, "min-ops", cfg.MinOps, "fewest operations per trial")
	flag.IntVar(&cfg.MaxOps, "max-ops", cfg.MaxOps, "most operations per trial")
	sync := flag.String("sync", strings.Join(cfg.Synchronous, ","), "SQLite synchronous settings to run at, comma-separated; empty to skip SQLite")
	flag.BoolVar(&cfg.River, "river", cfg.River, "include River")
	flag.BoolVar(&cfg.TxBaseline, "tx-baseline", cfg.TxBaseline, "include the four-statement Complete as a second baseline")
	flag.BoolVar(&cfg.Ablation, "ablation", cfg.Ablation, "include the contenders that price one choice of the library each")
	flag.StringVar(&cfg.AlterLibrary, "alter-library", "", "SQL to run on the library's schema once it is applied, to measure "+
		"what a part of it costs (an ablation; the report says so at its top)")
	only := flag.String("only", "", "run only the workloads whose names match this regular expression")
	pg := flag.String("postgres", firstEnv("JOBS_BENCH_POSTGRES_DSN", "JOBS_TEST_POSTGRES_DSN"), "PostgreSQL DSN; empty to skip")
	flag.Parse()
	cfg.PostgresDSN = *pg
	cfg.Synchronous = nil
	for _, s := range strings.Split(*sync, ",") {
		switch s = strings.ToUpper(strings.TrimSpace(s)); s {
		case "":
		case "FULL", "NORMAL":
			cfg.Synchronous = append(cfg.Synchronous, s)
		default:
			fmt.Fprintf(os.Stderr, "report: -sync: %q: want FULL or NORMAL\n", s)
			os.Exit(2)
		}
	}
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
	command := "cd bench && go run ./cmd/report"
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "out" && f.Name != "postgres" {
			command += " -" + f.Name + "=" + shellQuote(f.Value.String())
		}
	})
	if err := rep.WriteFiles(*out, command); err != nil {
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

// shellQuote quotes s for a shell where it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,/:=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
