package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
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

func (r *Report) cell(dialect, workload, contender string) *Cell {
	for _, c := range r.Cells {
		if c.Dialect == dialect && c.Workload.Name == workload && c.Contender == contender {
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

// Ratio is the cell's throughput as a multiple of the baseline's, run by run.
func (r *Report) Ratio(c *Cell) Summary {
	if c.Contender == "sql" {
		return Summary{Median: 1, Min: 1, Max: 1, N: len(c.Samples)}
	}
	return pairRatios(c, r.cell(c.Dialect, c.Workload.Name, "sql"), func(s Sample) float64 { return s.OpsPerSec })
}

// TargetResult is one target of the performance contract, as measured.
type TargetResult struct {
	Dialect string
	What    string
	Want    string
	Got     Summary
	Unit    string
	Met     bool
	Note    string
}

// Targets evaluates the targets on the report's measurements.
func (r *Report) Targets() []TargetResult {
	var out []TargetResult
	for _, d := range r.dialects() {
		floor := 0.90
		if d == "sqlite" {
			floor = 0.85
		}
		ratio := func(workload, what string, floor float64) {
			c := r.cell(d, workload, "jobs")
			if c == nil {
				return
			}
			g := r.Ratio(c)
			out = append(out, TargetResult{Dialect: d, What: what, Want: fmt.Sprintf("≥ %.2f×", floor), Got: g, Unit: "×", Met: g.Median >= floor})
		}
		ratio("submit-new-g1", "Submit, new key, 1 goroutine", floor)
		ratio("submit-new-g16", "Submit, new key, 16 goroutines", floor)
		ratio("submit-new-g64", "Submit, new key, 64 goroutines", floor)
		ratio("replay-g16", "Submit, replay, 16 goroutines", floor)
		ratio("complete-race-g16", "Complete (two attempts racing)", 0.90)
		ratio("storm-g64", "Duplicate storm", 0.90)
		if c := r.cell(d, "storm-g64", "jobs"); c != nil {
			v, _ := c.Violations()
			out = append(out, TargetResult{Dialect: d, What: "Duplicate storm: duplicates, split IDs", Want: "0",
				Got: Summary{Median: float64(v), Min: float64(v), Max: float64(v), N: len(c.Samples)}, Met: v == 0})
		}
		small, big := r.cell(d, "submit-stored-10k", "jobs"), r.cell(d, "submit-stored-1m", "jobs")
		if small != nil && big != nil {
			g := pairRatios(big, small, func(s Sample) float64 { return float64(s.P50) })
			out = append(out, TargetResult{Dialect: d, What: "Submit p50 at 1,000,000 stored ÷ at 10,000", Want: "≤ 1.10×", Got: g, Unit: "×", Met: g.Median <= 1.10})
		}
		if d == "postgres" {
			for _, w := range []string{"submit-new-g1", "replay-g16"} {
				if c := r.cell(d, w, "jobs"); c != nil {
					g := c.values(func(s Sample) float64 { return s.RoundTrips })
					out = append(out, TargetResult{Dialect: d, What: "Round trips per Submit (" + w + ")", Want: "1",
						Got: g, Met: g.Median < 1.05})
				}
			}
		}
		busy, all := 0, 0
		for _, c := range r.Cells {
			if c.Dialect == d {
				v, b := c.Violations()
				all += v
				busy += b
			}
		}
		if d == "sqlite" {
			out = append(out, TargetResult{Dialect: d, What: "`database is locked` errors, all workloads and contenders", Want: "0",
				Got: Summary{Median: float64(busy), Min: float64(busy), Max: float64(busy)}, Met: busy == 0})
		}
		out = append(out, TargetResult{Dialect: d, What: "Violations of any kind, all workloads and contenders", Want: "0",
			Got: Summary{Median: float64(all), Min: float64(all), Max: float64(all)}, Met: all == 0})
	}
	return out
}

func (r *Report) dialects() []string {
	var ds []string
	for _, c := range r.Cells {
		if !slices.Contains(ds, c.Dialect) {
			ds = append(ds, c.Dialect)
		}
	}
	return ds
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

func dialectTitle(d string) string {
	if d == "postgres" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// Markdown renders the report.
func (r *Report) Markdown(command string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Performance report")
	p("")
	p("Generated by `%s` on %s in %v: %d runs of every workload, contenders interleaved (their order rotates from run to run), "+
		"about %v per trial.", command, r.Started.Format("2006-01-02 15:04 UTC"), r.Duration.Round(time.Second), r.Config.Runs, r.Config.TrialTime)
	p("")
	m := r.Machine
	p("**Machine:** %s, %d cores, %s, %s; %s. Load average (1, 5, 15 min) %s before, %s after.",
		m.CPU, m.Cores, m.OS, m.GoVersion, strings.Join(m.Databases, ", "), m.LoadBefore, m.LoadAfter)
	p("")
	p("**Contenders:** `sql` is the hand-written baseline on the same tables and the same connections " +
		"(Submit: one `INSERT … ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING id`, plus a `SELECT` on a duplicate; " +
		"Complete: one data-modifying CTE on PostgreSQL, one immediate transaction on SQLite); `jobs` is this library; " +
		"`river` is River's unique insert (`UniqueOpts{ByArgs: true}`) through `riverpgxv5` and `riversqlite`.")
	p("")
	p("**How to read it:** every figure is the median of the runs, with the smallest and largest run in brackets. " +
		"A ratio is taken run by run against the baseline of the same run, then its median is reported: " +
		"×1.00 is the baseline's throughput, above is faster. Where the brackets of a ratio straddle the target, the difference is " +
		"within the noise of this machine: it is shared, and SQLite's `synchronous=FULL` makes every commit wait for the disk, " +
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
		if t.Unit == "" {
			digits = 2
			if t.Want == "0" {
				digits = 0
			}
		}
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s | %s |", dialectTitle(t.Dialect), t.What, t.Want, t.Got.format(digits, t.Unit), met)
	}
	for _, d := range r.dialects() {
		p("")
		p("## %s", dialectTitle(d))
		p("")
		p("| workload | contender | ops/s | p50 µs | p99 µs | × baseline | allocs/op | round trips/op | violations |")
		p("|---|---|---|---|---|---|---|---|---|")
		for _, c := range r.Cells {
			if c.Dialect != d {
				continue
			}
			v, busy := c.Violations()
			viol := fmt.Sprint(v)
			if busy > 0 {
				viol += fmt.Sprintf(" (%d busy)", busy)
			}
			trips := "–"
			// Round trips are counted on the store's connections; River has its own pool.
			if d == "postgres" && c.Contender != "river" {
				trips = fmt.Sprintf("%.2f", c.values(func(s Sample) float64 { return s.RoundTrips }).Median)
			}
			p("| %s | %s | %s | %s | %s | %s | %.0f | %s | %s |", c.Workload.Title, c.Contender,
				c.OpsPerSec().format(0, ""), c.P50().format(0, ""), c.P99().format(0, ""), r.Ratio(c).format(2, ""),
				c.values(func(s Sample) float64 { return s.AllocsPerOp }).Median, trips, viol)
		}
	}
	for _, c := range r.Cells {
		for _, s := range c.Samples {
			if len(s.Problems) > 0 {
				p("")
				p("Violation in %s %s/%s, run %d: %s", c.Dialect, c.Workload.Name, c.Contender, s.Run+1, strings.Join(s.Problems, "; "))
			}
		}
	}
	return b.String()
}

// Workloads whose ratio the chart shows, per dialect, with the target line.
func (r *Report) chartRows() []chartRow {
	var rows []chartRow
	for _, d := range r.dialects() {
		for _, c := range r.Cells {
			if c.Dialect != d || c.Contender == "sql" {
				continue
			}
			rows = append(rows, chartRow{dialect: d, label: c.Workload.Title, contender: c.Contender, ratio: r.Ratio(c)})
		}
	}
	return rows
}

type chartRow struct {
	dialect, label, contender string
	ratio                     Summary
}
