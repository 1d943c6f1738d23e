// Command report runs the benchmark suite of jobs beside hand-written SQL
// on a lean schema of its own, and River, on SQLite (at synchronous=FULL and
// at NORMAL), PostgreSQL and MySQL/MariaDB, and writes REPORT.md and
// ratios.svg from that one run (or, with -merge, splices the databases it
// ran into the REPORT.md there).
//
//	cd bench && go run ./cmd/report
//	cd bench && go run ./cmd/report -runs 2 -trial 200ms -out /tmp   # a short run, to check the pipeline
//
// PostgreSQL is found through JOBS_BENCH_POSTGRES_DSN, else
// JOBS_TEST_POSTGRES_DSN; every contender runs in a schema of its own,
// dropped at the end. MySQL or MariaDB likewise through
// JOBS_BENCH_MYSQL_DSN, else JOBS_TEST_MYSQL_DSN, every contender in a
// database of its own. Without them, only SQLite runs. To measure one
// database again and keep the others' figures, skip the others and merge:
//
//	cd bench && go run ./cmd/report -sync '' -postgres '' -mysql 'root@tcp(127.0.0.1:3306)/test' -merge
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
	merge := flag.Bool("merge", false, "merge the databases run into the REPORT.md in -out rather than rewrite it: their rows "+
		"and sections replace those of the same databases, the others' and ratios.svg stay as they are")
	only := flag.String("only", "", "run only the workloads whose names match this regular expression")
	pg := flag.String("postgres", firstEnv("JOBS_BENCH_POSTGRES_DSN", "JOBS_TEST_POSTGRES_DSN"), "PostgreSQL DSN; empty to skip")
	my := flag.String("mysql", firstEnv("JOBS_BENCH_MYSQL_DSN", "JOBS_TEST_MYSQL_DSN"), "MySQL or MariaDB DSN (go-sql-driver/mysql, "+
		"e.g. root@tcp(127.0.0.1:3306)/test) of a user who may create databases; empty to skip")
	flag.Parse()
	cfg.PostgresDSN = *pg
	cfg.MySQLDSN = *my
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
		switch {
		case f.Name == "out":
		case f.Name == "postgres" || f.Name == "mysql":
			// A DSN stays out of the report; that a database was skipped
			// does not.
			if f.Value.String() == "" {
				command += " -" + f.Name + "=''"
			}
		default:
			command += " -" + f.Name + "=" + shellQuote(f.Value.String())
		}
	})
	if *merge {
		err = rep.MergeInto(*out, command)
	} else {
		err = rep.WriteFiles(*out, command)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if *merge {
		fmt.Fprintf(os.Stderr, "merged into %s/REPORT.md in %v\n", *out, time.Since(start).Round(time.Second))
	} else {
		fmt.Fprintf(os.Stderr, "wrote %s/REPORT.md and %s/ratios.svg in %v\n", *out, *out, time.Since(start).Round(time.Second))
	}
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
