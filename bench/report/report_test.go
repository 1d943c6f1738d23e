package report

import (
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/intentjobs/jobs/bench/perf"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener")); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// tinyConfig is the default configuration with runs runs of trials of a
// few dozen operations, logging nothing: enough to exercise the report.
func tinyConfig(runs int) Config {
	cfg := DefaultConfig()
	cfg.Runs = runs
	cfg.TrialTime = time.Millisecond
	cfg.MinOps, cfg.MaxOps = 16, 32
	cfg.Log = io.Discard
	return cfg
}

// TestRunSmall runs the whole report with tiny counts: every workload, every
// contender, on SQLite at both synchronous settings and (when
// JOBS_TEST_POSTGRES_DSN and JOBS_TEST_MYSQL_DSN are set) PostgreSQL and
// MySQL, and checks the files it writes.
func TestRunSmall(t *testing.T) {
	cfg := tinyConfig(2)
	cfg.PostgresDSN = os.Getenv("JOBS_TEST_POSTGRES_DSN")
	cfg.MySQLDSN = os.Getenv("JOBS_TEST_MYSQL_DSN")
	cfg.Workloads = nil
	for _, w := range perf.Suite() {
		if w.Kind == perf.SubmitStored {
			w.Stored /= 1000 // 10 and 1,000
		}
		cfg.Workloads = append(cfg.Workloads, w)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir, "go test"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Submit of new keys against the leanest baseline", "## What each guarantee and choice costs",
		"| String job IDs (`sql-lean+text-id`) |", "| CHECK constraints (taken from the library) (`jobs-no-checks`) |",
		"| SQLite, synchronous=NORMAL | Submit, new key, ~100 B, 1 goroutine, against the leanest baseline | ≥ 0.80× |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	sections := []string{"SQLite, synchronous=FULL", "SQLite, synchronous=NORMAL"}
	if cfg.PostgresDSN != "" {
		sections = append(sections, "PostgreSQL")
	}
	if cfg.MySQLDSN != "" {
		sections = append(sections, "MySQL/MariaDB")
	}
	for _, d := range sections {
		river := "| Duplicate storm, 64 goroutines per key | river |"
		if d == "MySQL/MariaDB" {
			river = "| Duplicate storm, 64 goroutines per key | sql-lean |" // no River on MySQL
		}
		for _, want := range []string{"## " + d,
			river,
			"| Complete, 2 attempts racing per job, 8 jobs at once | jobs |",
			"| Complete, 2 attempts racing per job, 8 jobs at once | sql-tx |",
			"| " + d + " | Allocations per operation, worst workload",
			"| " + d + " | Submit p50 at 1,000,000 stored ÷ at 10,000 |",
			"| Submit, new key, ~10 KB, 64 goroutines | sql-lean |",
			"| " + d + " | ~100 B | 16 |",
		} {
			if !strings.Contains(string(md), want) {
				t.Errorf("REPORT.md lacks %q", want)
			}
		}
	}
	for _, tr := range rep.Targets() {
		if strings.Contains(tr.What, "Violations") && !tr.Met {
			t.Errorf("%s: %s: %v", tr.DB.ID(), tr.What, tr.Got.Median)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "ratios.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("ratios.svg is not well-formed: %v", err)
		}
	}
	if n := strings.Count(string(svg), "<rect "); n < 10 {
		t.Errorf("ratios.svg has %d bars, want at least 10", n)
	}
}

// TestAblation runs the Complete workload with the library's schema
// altered, and checks that the alteration reached the library's database
// (a statement that cannot run there fails the run) and that the report
// says, before anything else, that its figures are not the library's.
func TestAblation(t *testing.T) {
	cfg := tinyConfig(1)
	cfg.Synchronous = []string{"NORMAL"}
	cfg.River, cfg.TxBaseline = false, false
	cfg.Workloads = nil
	for _, w := range perf.Suite() {
		if w.Kind == perf.Complete {
			cfg.Workloads = append(cfg.Workloads, w)
		}
	}
	cfg.AlterLibrary = "DROP INDEX intentjobs_jobs_created_at_idx; DROP INDEX intentjobs_attempts_stale_idx"
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown("go test")
	want := "# Performance report\n\n**An ablation, not the library's figures:** the library's schema was altered once it " +
		"was applied, with `" + cfg.AlterLibrary + "`."
	if !strings.HasPrefix(md, want) {
		t.Errorf("REPORT.md starts %q, want %q", md[:min(len(md), len(want))], want)
	}
	cfg.AlterLibrary = "DROP INDEX no_such_index"
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no_such_index") {
		t.Errorf("an alteration that cannot run: err = %v, want the statement's error", err)
	}
	cfg.AlterLibrary = ""
	if rep, err = Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if md := rep.Markdown("go test"); strings.Contains(md, "An ablation, not the library's figures") {
		t.Errorf("a report of the library as it is says it is an ablation")
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in   []float64
		want Summary
	}{
		{[]float64{3, 1, 2}, Summary{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 2, 3}, Summary{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{[]float64{5}, Summary{Median: 5, Min: 5, Max: 5, N: 1}},
	}
	for _, tt := range tests {
		if got := summarize(tt.in); got != tt.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
