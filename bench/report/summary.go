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

// Lean is the name of the leanest baseline (perf.Lean without features).
const Lean = "sql-lean"

// RatioTo is the cell's throughput as a multiple of contender base's on the
// same workload, run by run.
func (r *Report) RatioTo(c *Cell, base string) Summary {
	return pairRatios(c, r.cell(c.DB, c.Workload.Name, base), opsPerSec)
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
		if db.Dialect == "sqlite" && db.Synchronous == "NORMAL" {
			for _, w := range r.Config.Workloads {
				if w.Kind != perf.SubmitNew || w.Size == perf.Size10KB {
					continue
				}
				if c := r.cell(db, w.Name, "jobs"); c != nil {
					if g := r.RatioTo(c, Lean); !math.IsNaN(g.Median) {
						out = append(out, TargetResult{DB: db, What: w.Title + ", against the leanest baseline", Want: "≥ 0.80×",
							Got: g, Unit: "×", Met: g.Median >= 0.80})
					}
				}
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
		if db.Dialect == perf.Postgres || db.Dialect == perf.MySQL {
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
			if c.DB == db && !perf.Unsafe(c.Contender) {
				v, b := c.Violations()
				all += v
				busy += b
			}
		}
		if db.Dialect == "sqlite" {
			out = append(out, TargetResult{DB: db, What: "`database is locked` errors, all workloads and contenders", Want: "0",
				Got: count(busy), Met: busy == 0})
		}
		out = append(out, TargetResult{DB: db, What: "Violations of any kind, all workloads and contenders (but the unsafe variant priced below)", Want: "0",
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
	p("- `sql-lean`, the leanest baseline: what an engineer who owns the schema hand-writes when Submit is all there is " +
		"to it. The job's ID is the table's integer key (SQLite's rowid, a PostgreSQL identity), the request's hash 32 raw " +
		"bytes, and the table has only the columns Submit writes (owner, key, params, hash) and `UNIQUE (owner, idempotency_key)`. " +
		"Submit: `INSERT … ON CONFLICT DO NOTHING RETURNING id`, plus a `SELECT` of the stored hash on a duplicate. It runs " +
		"the Submit workloads only.")
	p("- `sql`, the baseline on the library's choices: the same Submit on a schema that makes the library's choices " +
		"(a text primary key made in Go, the hash as 64 hex digits, kind and provider columns, the lifecycle's columns) " +
		"but no trigger and no CHECK constraint, an `attempts` table with an index on `job_id` and a unique partial index " +
		"that keeps one attempt in doubt per job. StartAttempt: one guarded `INSERT … SELECT`. Complete: the compare-and-swap " +
		"`UPDATE jobs … WHERE id = $1 AND version = $2 AND completed_by IS NULL` and the attempt marked won or lost, in one " +
		"statement (a data-modifying CTE) on PostgreSQL and one immediate transaction of two statements on SQLite. It reads " +
		"back only what a caller needs: an ID and a created flag, or a won flag. The workloads' `× baseline` are against it; " +
		"`× lean` against `sql-lean`.")
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
	if r.Config.Ablation {
		p("- `sql-lean+…`, the leanest baseline with one of the library's choices added, and `jobs-no-checks` and `jobs-store`, " +
			"the library with one part switched off, on the ablation workloads: see the last section.")
	}
	p("")
	p("**Requests:** about 1 KB of JSON per key (and about 100 B and 10 KB where a workload says so) (an order: customer, address, three line items, metadata), different for every key; "+
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
		if db.Dialect == perf.MySQL {
			p("%s", mysqlContenders)
			p("")
		}
		p("| workload | contender | ops/s | p50 µs | p99 µs | × baseline | × lean | allocs/op | allocs × baseline | round trips/op | violations |")
		p("|---|---|---|---|---|---|---|---|---|---|---|")
		for _, c := range r.Cells {
			if c.DB != db || isAblation(c.Contender) {
				continue
			}
			v, busy := c.Violations()
			viol := fmt.Sprint(v)
			if busy > 0 {
				viol += fmt.Sprintf(" (%d busy)", busy)
			}
			trips := "–"
			if db.Dialect == perf.Postgres || db.Dialect == perf.MySQL {
				trips = fmt.Sprintf("%.2f", c.values(func(s Sample) float64 { return s.RoundTrips }).Median)
			}
			lean := r.RatioTo(c, Lean)
			if c.Contender == Lean {
				lean = Summary{Median: 1, Min: 1, Max: 1, N: len(c.Samples)}
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s |", c.Workload.Title, c.Contender,
				c.OpsPerSec().format(0, ""), c.P50().format(0, ""), c.P99().format(0, ""), r.Ratio(c).format(2, ""),
				lean.format(2, ""), c.values(allocsPerOp).Median, r.AllocRatio(c).format(2, ""), trips, viol)
		}
	}
	r.leanSection(p)
	r.ablationSection(p)
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

// mysqlContenders says what the contenders are on MySQL, where they
// differ from the other databases'.
const mysqlContenders = "On MySQL/MariaDB, each contender in a database of its own, all through go-sql-driver/mysql with the " +
	"library's session settings (READ COMMITTED, strict mode, parameters interpolated by the client), 10 connections. " +
	"`jobs` is the `mysql` module's store through `Manager`. `sql-lean`: a BIGINT AUTO_INCREMENT key, the hash as " +
	"BINARY(32), only owner, key, params and hash, and `UNIQUE (owner, idempotency_key)`; Submit is " +
	"`INSERT … ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)` and, on a duplicate, a `SELECT` of the stored hash by ID. " +
	"`sql`: the same Submit, integer key and binary hash on a table with kind, provider and the lifecycle's columns, and " +
	"an `attempts` table whose one attempt in doubt per job is a unique index on a generated column; StartAttempt is a " +
	"guarded `INSERT … SELECT`, Complete one multi-table `UPDATE` (the compare-and-swap and the attempt's fate; a loser's " +
	"attempt is then marked lost by a second statement). `sql-tx`: Complete as `SELECT … FOR UPDATE`, the swap, the mark, " +
	"commit. River has no MySQL driver, and the ablation's contenders are not built for MySQL."

// chartRows are the ratios the chart shows: every contender but the
// baseline, per database.
func (r *Report) chartRows() []chartRow {
	var rows []chartRow
	for _, db := range r.DBs {
		for _, c := range r.Cells {
			if c.DB != db || c.Contender == "sql" || isAblation(c.Contender) {
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

// isAblation reports whether contender prices one choice (see
// Config.Ablation): its figures are in the ablation section only.
func isAblation(contender string) bool {
	return strings.HasPrefix(contender, Lean+"+") || contender == perf.JobsNoChecks || contender == perf.JobsStore ||
		contender == perf.JobsNoNotify || slices.Contains(perf.CompleteVariants, contender)
}

// leanSection writes the library's Submit of new keys against both
// baselines, by database, request size and goroutines.
func (r *Report) leanSection(p func(string, ...any)) {
	var rows []string
	for _, db := range r.DBs {
		for _, w := range r.Config.Workloads {
			if w.Kind != perf.SubmitNew {
				continue
			}
			c, lean := r.cell(db, w.Name, "jobs"), r.cell(db, w.Name, Lean)
			if c == nil || lean == nil {
				continue
			}
			size := map[int]string{perf.Size100B: "~100 B", perf.Size10KB: "~10 KB"}[w.Size]
			if size == "" {
				size = "~1 KB"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %s / %s / %s |", db.Title(), size, w.Goroutines,
				r.RatioTo(c, Lean).format(2, "×"), r.Ratio(c).format(2, "×"), r.RatioTo(r.cell(db, w.Name, "sql"), Lean).format(2, "×"),
				c.P50().format(0, ""), lean.P50().format(0, ""), r.cell(db, w.Name, "sql").P50().format(0, "")))
		}
	}
	if len(rows) == 0 {
		return
	}
	p("")
	p("## Submit of new keys against the leanest baseline")
	p("")
	p("Throughput of the library (`jobs`) as a multiple of the leanest hand-written Submit (`sql-lean`) and of the one on " +
		"the library's choices (`sql`), and of `sql` against `sql-lean`: what those choices cost hand-written code. " +
		"Latencies are the median of the runs' p50, in µs.")
	p("")
	p("| database | request | goroutines | jobs ÷ sql-lean | jobs ÷ sql | sql ÷ sql-lean | p50 µs: jobs / sql-lean / sql |")
	p("|---|---|---|---|---|---|---|")
	for _, row := range rows {
		p("%s", row)
	}
}

// choices say, for each contender of the ablation, what it prices: what a
// user of the library gets from the choice, which a hand-written Submit
// without it gives up. A "+" contender is the leanest baseline with the
// choice added; the others are the library with it taken away.
var choices = []struct {
	contender, choice, buys string
	base                    string // what the contender is measured against, if not sql-lean or jobs
}{
	{Lean + "+text-id", "String job IDs", "IDs that are text (`job_…`), unguessable, ordered by time, the same on every store and in every log; an integer key is shorter, but counts the jobs for anyone who sees one", ""},
	{Lean + "+hex-hash", "Hex fingerprint", "a fingerprint that reads the same in SQL, logs and the API", ""},
	{Lean + "+kind-provider", "Kind and provider columns", "the job says what it asks of whom: listings, failover and reconcilers read them", ""},
	{Lean + "+lifecycle-cols", "Lifecycle columns", "state, version, result, winner and times in the job's row: the lifecycle itself (attempts, the compare-and-swap)", ""},
	{Lean + "+checks", "CHECK constraints", "the database refuses a row that breaks an invariant, whatever wrote it", ""},
	{perf.JobsNoChecks, "CHECK constraints (taken from the library)", "as above, measured on the library's own schema", ""},
	{Lean + "+canonical", "Canonical form", "the same intent with its keys in another order, or other spacing, is a replay rather than a key conflict", ""},
	{Lean + "+file-lock", "Cross-process file lock", "writers of other processes queue for the write lock rather than poll SQLite's busy handler (no `database is locked`, no starved writer)", ""},
	{Lean + "+whole-job", "Returning the whole job", "Submit returns the job (state, params, times), not an ID; a duplicate reads its row whole", ""},
	{perf.JobsNoNotify, "The close notification (PostgreSQL)", "Manager.Wait learns a job closed from a notification rather than by polling; the trigger calls nothing unless someone waits", ""},
	{perf.CompleteUnlockedJob, "The lock that tells a loser who won (PostgreSQL)", "a losing Complete names the attempt it lost to; " +
		"without the lock on the job it reads, it may read the job before the winner's swap commits, and name nobody. " +
		"Measured on the one-statement Complete (`bench/ablation/library-unlocked-job.sql` against `library.sql`)", perf.CompleteLibrary},
	{perf.CompleteNarrow, "Returning the whole job from Complete (PostgreSQL)", "Complete returns the job as it closed it; " +
		"4 columns of it rather than 16 (`library-narrow.sql` against `library.sql`)", perf.CompleteLibrary},
	{perf.JobsStore, "The Manager (validation, canonical form, fingerprint, events)", "typed errors that write nothing on bad input, the canonical fingerprint of kind, provider and params, events for metrics", ""},
}

// ablationSection writes the price of each choice: the throughput of the
// contender that adds it to the leanest baseline, as a multiple of that
// baseline's, or of the library without it as a multiple of the library's.
func (r *Report) ablationSection(p func(string, ...any)) {
	var ws []perf.Workload
	for _, w := range r.Config.Workloads {
		if w.Ablation {
			ws = append(ws, w)
		}
	}
	if !r.Config.Ablation || len(ws) == 0 || !slices.ContainsFunc(r.Cells, func(c *Cell) bool { return isAblation(c.Contender) }) {
		return
	}
	p("")
	p("## What each guarantee and choice costs")
	p("")
	p("Each row takes one choice of the library and measures it alone, interleaved with the rest of the run: added to " +
		"the leanest baseline (`sql-lean+…`: its throughput ÷ `sql-lean`'s; below 1.00 is what the choice costs), or taken " +
		"from the library (`jobs-…`: its throughput ÷ `jobs`'s, and `pg-complete-…`: ÷ `pg-complete`'s, the library's " +
		"one-statement Complete run by the benchmark; above 1.00 is what a user would gain without it). " +
		"Where the brackets straddle 1.00, the choice costs nothing this machine can tell from its noise.")
	p("")
	head, rule := "| choice | what it buys | database |", "|---|---|---|"
	for _, w := range ws {
		head += " " + w.Title + " |"
		rule += "---|"
	}
	p("%s", head)
	p("%s", rule)
	for _, ch := range choices {
		first := true
		for _, db := range r.DBs {
			buys := ch.buys
			if perf.Unsafe(ch.contender) {
				runs, broken := 0, 0
				for _, c := range r.Cells {
					if c.DB == db && c.Contender == ch.contender {
						for _, sm := range c.Samples {
							runs++
							if sm.Violations > 0 {
								broken++
							}
						}
					}
				}
				buys += fmt.Sprintf(". Without it, in this run: %d of %d trials broke an outcome (a loser recorded as cancelled, "+
					"its winner unnamed; see the violations at the end)", broken, runs)
			}
			line, any := fmt.Sprintf("| %s (`%s`) | %s | %s |", ch.choice, ch.contender, buys, db.Title()), false
			if !first {
				line = fmt.Sprintf("| | | %s |", db.Title())
			}
			for _, w := range ws {
				c := r.cell(db, w.Name, ch.contender)
				base := ch.base
				switch {
				case base != "":
				case strings.HasPrefix(ch.contender, Lean+"+"):
					base = Lean
				default:
					base = "jobs"
				}
				g := summarize(nil)
				if c != nil {
					g, any = r.RatioTo(c, base), true
				}
				line += " " + g.format(2, "×") + " |"
			}
			if any {
				p("%s", line)
				first = false
			}
		}
	}
}
