package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs/bench/perf"
)

// Summary is the median of some runs' values, with their range.
type Summary struct {
	Median, Min, Max float64
	N                int
}

func summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Summary{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

func (c *Cell) values(f func(Sample) float64) Summary {
	xs := make([]float64, len(c.Samples))
	for i, s := range c.Samples {
		xs[i] = f(s)
	}
	return summarize(xs)
}

// OpsPerSec summarizes the cell's throughput.
func (c *Cell) OpsPerSec() Summary { return c.values(func(s Sample) float64 { return s.OpsPerSec }) }

// P50 summarizes the cell's median latency, in microseconds.
func (c *Cell) P50() Summary {
	return c.values(func(s Sample) float64 { return float64(s.P50) / float64(time.Microsecond) })
}

// P99 summarizes the cell's 99th percentile latency, in microseconds.
func (c *Cell) P99() Summary {
	return c.values(func(s Sample) float64 { return float64(s.P99) / float64(time.Microsecond) })
}

// Violations is the total over all runs.
func (c *Cell) Violations() (all, busy int) {
	for _, s := range c.Samples {
		all += s.Violations
		busy += s.Busy
	}
	return all, busy
}

func (r *Report) cell(db DB, workload, contender string) *Cell {
	for _, c := range r.Cells {
		if c.DB == db && c.Workload.Name == workload && c.Contender == contender {
			return c
		}
	}
	return nil
}

// pairRatios returns f(a)/f(b) for every run both cells have.
func pairRatios(a, b *Cell, f func(Sample) float64) Summary {
	if a == nil || b == nil {
		return summarize(nil)
	}
	var xs []float64
	for _, sa := range a.Samples {
		for _, sb := range b.Samples {
			if sa.Run == sb.Run && f(sb) > 0 {
				xs = append(xs, f(sa)/f(sb))
			}
		}
	}
	return summarize(xs)
}

func opsPerSec(s Sample) float64   { return s.OpsPerSec }
func allocsPerOp(s Sample) float64 { return s.AllocsPerOp }

// Ratio is the cell's throughput as a multiple of the baseline's ("sql",
// whose Complete is one statement), run by run.
func (r *Report) Ratio(c *Cell) Summary {
	if c.Contender == "sql" {
		return Summary{Median: 1, Min: 1, Max: 1, N: len(c.Samples)}
	}
	return pairRatios(c, r.cell(c.DB, c.Workload.Name, "sql"), opsPerSec)
}

// AllocRatio is the cell's allocations per operation as a multiple of the
// baseline's, run by run.
func (r *Report) AllocRatio(c *Cell) Summary {
	return pairRatios(c, r.cell(c.DB, c.Workload.Name, "sql"), allocsPerOp)
}

// TargetResult is one target of the performance contract, as measured.
type TargetResult struct {
	DB   DB
	What string
	Want string
	Got  Summary
	Unit string
	Met  bool
}

// Targets evaluates the targets on the report's measurements: the
// library's throughput as a multiple of the baseline's (Submit at least
// 0.90× on PostgreSQL and 0.85× on SQLite; Complete, against the
// one-statement compare-and-swap, and the duplicate storm at least 0.90×),
// its Submit latency with a million jobs stored against 10,000 (at most
// 1.10×), its allocations against the baseline's (at most 2×), one round
// trip per Submit on PostgreSQL, and no violation.
func (r *Report) Targets() []TargetResult {
	var out []TargetResult
	count := func(n int) Summary { return Summary{Median: float64(n), Min: float64(n), Max: float64(n), N: 1} }
	for _, db := range r.DBs {
		floor := 0.90
		if db.Dialect == "sqlite" {
			floor = 0.85
		}
		ratio := func(workload, what string, floor float64) {
			if c := r.cell(db, workload, "jobs"); c != nil {
				g := r.Ratio(c)
				out = append(out, TargetResult{DB: db, What: what, Want: fmt.Sprintf("≥ %.2f×", floor), Got: g, Unit: "×", Met: g.Median >= floor})
			}
		}
		ratio("submit-new-g1", "Submit, new key, 1 goroutine", floor)
		ratio("submit-new-g16", "Submit, new key, 16 goroutines", floor)
		ratio("submit-new-g64", "Submit, new key, 64 goroutines", floor)
		ratio("replay-g16", "Submit, replay, 16 goroutines", floor)
		ratio("complete-race-g16", "Complete (two attempts racing), against the one-statement CAS", 0.90)
		ratio("storm-g64", "Duplicate storm", 0.90)
		if c := r.cell(db, "storm-g64", "jobs"); c != nil {
			v, _ := c.Violations()
			out = append(out, TargetResult{DB: db, What: "Duplicate storm: duplicates, split IDs", Want: "0", Got: count(v), Met: v == 0})
		}
		small, big := r.cell(db, "submit-stored-10k", "jobs"), r.cell(db, "submit-stored-1m", "jobs")
		if small != nil && big != nil {
			g := pairRatios(big, small, func(s Sample) float64 { return float64(s.P50) })
			out = append(out, TargetResult{DB: db, What: "Submit p50 at 1,000,000 stored ÷ at 10,000", Want: "≤ 1.10×", Got: g, Unit: "×", Met: g.Median <= 1.10})
		}
		worst, worstName := summarize(nil), ""
		for _, c := range r.Cells {
			if c.DB != db || c.Contender != "jobs" {
				continue
			}
			if g := r.AllocRatio(c); !math.IsNaN(g.Median) && (math.IsNaN(worst.Median) || g.Median > worst.Median) {
				worst, worstName = g, c.Workload.Name
			}
		}
		if worstName != "" {
			out = append(out, TargetResult{DB: db, What: "Allocations per operation, worst workload (" + worstName + ")",
				Want: "≤ 2.00×", Got: worst, Unit: "×", Met: worst.Median <= 2})
		}
		if db.Dialect == "postgres" {
			for _, w := range []string{"submit-new-g1", "replay-g16"} {
				if c := r.cell(db, w, "jobs"); c != nil {
					g := c.values(func(s Sample) float64 { return s.RoundTrips })
					out = append(out, TargetResult{DB: db, What: "Round trips per Submit (" + w + ")", Want: "1",
						Got: g, Met: g.Median < 1.05})
				}
			}
		}
		busy, all := 0, 0
		for _, c := range r.Cells {
			if c.DB == db {
				v, b := c.Violations()
				all += v
				busy += b
			}
		}
		if db.Dialect == "sqlite" {
			out = append(out, TargetResult{DB: db, What: "`database is locked` errors, all workloads and contenders", Want: "0",
				Got: count(busy), Met: busy == 0})
		}
		out = append(out, TargetResult{DB: db, What: "Violations of any kind, all workloads and contenders", Want: "0",
			Got: count(all), Met: all == 0})
	}
	return out
}

func (s Summary) format(digits int, unit string) string {
	if math.IsNaN(s.Median) {
		return "–"
	}
	f := "%." + fmt.Sprint(digits) + "f"
	if s.N <= 1 || s.Min == s.Max {
		return fmt.Sprintf(f+"%s", s.Median, unit)
	}
	return fmt.Sprintf(f+"%s ("+f+"–"+f+")", s.Median, unit, s.Min, s.Max)
}

// Markdown renders the report.
func (r *Report) Markdown(command string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Performance report")
	p("")
	if r.Config.AlterLibrary != "" {
		p("**An ablation, not the library's figures:** the library's schema was altered once it was applied, with `%s`.",
			strings.Join(strings.Fields(r.Config.AlterLibrary), " "))
		p("")
	}
	p("Generated by `%s` on %s in %v: %d runs of every workload, contenders interleaved (their order rotates from run to run), "+
		"about %v per trial; every contender warmed up first (%d Submits before the stored-jobs workloads, so that they "+
		"measure a store whose caches are in service).", command, r.Started.Format("2006-01-02 15:04 UTC"),
		r.Duration.Round(time.Second), r.Config.Runs, r.Config.TrialTime, StoredWarmOps)
	p("")
	m := r.Machine
	p("**Machine:** %s, %d cores, %s, %s; %s. Load average (1, 5, 15 min) %s before and %s after; "+
		"the 1-minute load average while the suite ran (%d samples): median %s.",
		m.CPU, m.Cores, m.OS, m.GoVersion, strings.Join(m.Databases, ", "), m.LoadBefore, m.LoadAfter, m.LoadDuring.N, m.LoadDuring.format(2, ""))
	p("")
	p("**Contenders,** each in a database of its own (a PostgreSQL schema, a SQLite file), all with the same connection " +
		"settings (on SQLite: WAL, the synchronous setting of the section, a busy timeout, immediate transactions, one writer " +
		"connection with a 32 MiB page cache and a pool of readers, 32 cached statements per connection; on PostgreSQL: pgx through `database/sql`, 10 connections):")
	p("")
	p("- `sql`, the baseline: what a competent engineer would hand-write for the same work on a lean schema of its own " +
		"(a `jobs` table with `UNIQUE (owner, idempotency_key)`, an `attempts` table with an index on `job_id` and a unique " +
		"partial index that keeps one attempt in doubt per job; no trigger, no CHECK constraint). Submit: " +
		"`INSERT … ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING id`, plus a `SELECT` of the stored request hash " +
		"on a duplicate. StartAttempt: one guarded `INSERT … SELECT`. Complete: the compare-and-swap " +
		"`UPDATE jobs … WHERE id = $1 AND version = $2 AND completed_by IS NULL` and the attempt marked won or lost, in one " +
		"statement (a data-modifying CTE) on PostgreSQL and one immediate transaction of two statements on SQLite. It reads " +
		"back only what a caller needs: an ID and a created flag, or a won flag.")
	p("- `jobs`, this library, through `Manager`. It returns more: the job itself from Submit and Complete (built from " +
		"what it sent where it can, read back where it cannot), and it validates and canonicalizes the parameters, " +
		"fingerprints them, and keeps its schema's CHECK constraints, its indexes for retention and reconcilers and, on " +
		"PostgreSQL, the trigger that notifies a closed job's waiters (only when someone waits). What that costs is in " +
		"the ratios.")
	p("- `sql-tx`, a second baseline for Complete only: the same lean schema, Complete as a transaction of four statements " +
		"(read the attempt, the compare-and-swap, mark the attempt, commit).")
	p("- `river`, [River](https://riverqueue.com)'s unique insert (`UniqueOpts{ByArgs: true}`) through `riverpgxv5` and " +
		"`riversqlite`, a peer for the Submit workloads.")
	p("")
	p("**Requests:** about 1 KB of JSON per key (an order: customer, address, three line items, metadata), different for every key; "+
		"random 32-digit keys. The stored-jobs workloads prefill the library's and the baseline's tables the same way "+
		"(set-based SQL, the same JSON shape, random keys over %d owners) and submit for those owners.", perf.StoredOwners)
	p("")
	p("**How to read it:** every figure is the median of the runs, with the smallest and largest run in brackets. " +
		"A ratio is taken run by run against the baseline of the same run, then its median is reported: " +
		"×1.00 is the baseline's throughput, above is faster. Where the brackets of a ratio straddle the target, the difference is " +
		"within the noise of this machine: it is shared, and at `synchronous=FULL` every SQLite commit waits for the disk, " +
		"whose flush time varies from one moment to the next. Allocations count the whole process (driver included) per operation.")
	p("")
	p("![ratios](ratios.svg)")
	p("")
	p("## Targets")
	p("")
	p("| database | target | wanted | measured: median (min–max) | met |")
	p("|---|---|---|---|---|")
	for _, t := range r.Targets() {
		digits := 2
		if t.Want == "0" {
			digits = 0
		}
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s | %s |", t.DB.Title(), t.What, t.Want, t.Got.format(digits, t.Unit), met)
	}
	for _, db := range r.DBs {
		p("")
		p("## %s", db.Title())
		p("")
		p("| workload | contender | ops/s | p50 µs | p99 µs | × baseline | allocs/op | allocs × baseline | round trips/op | violations |")
		p("|---|---|---|---|---|---|---|---|---|---|")
		for _, c := range r.Cells {
			if c.DB != db {
				continue
			}
			v, busy := c.Violations()
			viol := fmt.Sprint(v)
			if busy > 0 {
				viol += fmt.Sprintf(" (%d busy)", busy)
			}
			trips := "–"
			if db.Dialect == "postgres" {
				trips = fmt.Sprintf("%.2f", c.values(func(s Sample) float64 { return s.RoundTrips }).Median)
			}
			p("| %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s |", c.Workload.Title, c.Contender,
				c.OpsPerSec().format(0, ""), c.P50().format(0, ""), c.P99().format(0, ""), r.Ratio(c).format(2, ""),
				c.values(allocsPerOp).Median, r.AllocRatio(c).format(2, ""), trips, viol)
		}
	}
	for _, c := range r.Cells {
		for _, s := range c.Samples {
			if len(s.Problems) > 0 {
				p("")
				p("Violation in %s %s/%s, run %d: %s", c.DB.ID(), c.Workload.Name, c.Contender, s.Run+1, strings.Join(s.Problems, "; "))
			}
		}
	}
	return b.String()
}

// chartRows are the ratios the chart shows: every contender but the
// baseline, per database.
func (r *Report) chartRows() []chartRow {
	var rows []chartRow
	for _, db := range r.DBs {
		for _, c := range r.Cells {
			if c.DB != db || c.Contender == "sql" {
				continue
			}
			rows = append(rows, chartRow{db: db, label: c.Workload.Title, contender: c.Contender, ratio: r.Ratio(c)})
		}
	}
	return rows
}

type chartRow struct {
	db               DB
	label, contender string
	ratio            Summary
}
