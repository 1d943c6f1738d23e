// Package report runs the benchmark suite several times, interleaving the
// contenders, and writes the results as a markdown table and an SVG chart.
package report

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for schema setup

	"github.com/intentjobs/jobs/bench/peer"
	"github.com/intentjobs/jobs/internal/perf"
)

// Config says what to run.
type Config struct {
	Runs        int           // runs of the whole suite; medians are taken over them
	TrialTime   time.Duration // aimed duration of one trial (one workload, one contender, one run)
	MinOps      int           // at least this many operations per trial
	MaxOps      int           // at most this many operations per trial
	PostgresDSN string        // empty: skip PostgreSQL
	SQLite      bool          // run on SQLite
	River       bool          // include River as a peer
	Workloads   []perf.Workload
	Log         io.Writer
}

// DefaultConfig is what the report command runs.
func DefaultConfig() Config {
	return Config{
		Runs:      5,
		TrialTime: 400 * time.Millisecond,
		MinOps:    200,
		MaxOps:    20_000,
		SQLite:    true,
		River:     true,
		Workloads: perf.Suite(),
		Log:       os.Stderr,
	}
}

// Sample is one trial's measurements.
type Sample struct {
	Run         int
	OpsPerSec   float64
	P50, P99    time.Duration
	AllocsPerOp float64
	RoundTrips  float64 // per operation, PostgreSQL only
	Violations  int
	Busy        int
	Problems    []string
}

// Cell is one contender on one workload on one database, over all runs.
type Cell struct {
	Dialect   string
	Workload  perf.Workload
	Contender string
	Samples   []Sample
}

// Report is the outcome of Run.
type Report struct {
	Config   Config
	Started  time.Time
	Duration time.Duration
	Machine  Machine
	Cells    []*Cell
}

// Machine describes where the report ran.
type Machine struct {
	CPU        string
	Cores      int
	GoVersion  string
	OS         string
	Databases  []string
	LoadBefore string
	LoadAfter  string
}

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Run runs the suite and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Config: cfg, Started: time.Now().UTC(), Machine: machine()}
	dir, err := os.MkdirTemp("", "jobs-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var dialects []string
	if cfg.SQLite {
		dialects = append(dialects, "sqlite")
	}
	if cfg.PostgresDSN != "" {
		dialects = append(dialects, "postgres")
	}
	for _, d := range dialects {
		if err := runDialect(ctx, cfg, rep, d, dir); err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
	}
	rep.Machine.LoadAfter = loadavg()
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// setup is one database with its contenders.
type setup struct {
	env         *perf.Env
	contenders  []perf.Contender
	closeRiver  func()
	dropSchema  func()
	stored      int // for SubmitStored workloads: the size it was filled to
	description string
}

func (s *setup) close() {
	if s.closeRiver != nil {
		s.closeRiver()
	}
	s.env.Close()
	if s.dropSchema != nil {
		s.dropSchema()
	}
}

func openSetup(ctx context.Context, cfg Config, dialect, dir string, river bool) (*setup, error) {
	s := &setup{}
	var err error
	if dialect == "postgres" {
		dsn, drop, err := newSchema(ctx, cfg.PostgresDSN)
		if err != nil {
			return nil, err
		}
		s.dropSchema = drop
		if s.env, err = perf.OpenPostgres(ctx, dsn); err != nil {
			drop()
			return nil, err
		}
	} else {
		sub, err := os.MkdirTemp(dir, "sqlite-")
		if err != nil {
			return nil, err
		}
		if s.env, err = perf.OpenSQLite(ctx, sub); err != nil {
			return nil, err
		}
	}
	s.contenders = []perf.Contender{perf.NewBaseline(s.env), perf.NewLibrary(s.env)}
	if river {
		r, err := peer.OpenRiver(ctx, s.env)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("river: %w", err)
		}
		s.closeRiver = r.Close
		s.contenders = append(s.contenders, r)
	}
	return s, err
}

func runDialect(ctx context.Context, cfg Config, rep *Report, dialect, dir string) error {
	// One database for the workloads that do not care how much is stored,
	// and one per stored size, filled once.
	main, err := openSetup(ctx, cfg, dialect, dir, cfg.River)
	if err != nil {
		return err
	}
	defer main.close()
	rep.Machine.Databases = append(rep.Machine.Databases, main.env.Version(ctx))
	setups := map[int]*setup{}
	for _, w := range cfg.Workloads {
		if w.Kind != perf.SubmitStored || setups[w.Stored] != nil {
			continue
		}
		s, err := openSetup(ctx, cfg, dialect, dir, false)
		if err != nil {
			return err
		}
		defer s.close()
		start := time.Now()
		if err := s.env.FillTo(ctx, w.Stored); err != nil {
			return err
		}
		cfg.logf("%s: prefilled %d jobs in %v", dialect, w.Stored, time.Since(start).Round(time.Millisecond))
		setups[w.Stored] = s
	}
	setupFor := func(w perf.Workload) *setup {
		if w.Kind == perf.SubmitStored {
			return setups[w.Stored]
		}
		return main
	}

	// Calibrate: a short trial of the baseline sets every contender's
	// operation count for the workload, so that all do the same work.
	ops := map[string]int{}
	cells := map[string]*Cell{}
	for _, w := range cfg.Workloads {
		s := setupFor(w)
		for _, c := range s.contenders {
			if applicable(w, c) {
				cells[w.Name+"/"+c.Name()] = &Cell{Dialect: dialect, Workload: w, Contender: c.Name()}
				// Warm up every contender: prepared statements, pools.
				if _, err := trial(ctx, s.env, w, c, warmOps(w)); err != nil {
					return err
				}
			}
		}
		r, err := trial(ctx, s.env, w, s.contenders[0], max(cfg.MinOps/2, warmOps(w)))
		if err != nil {
			return err
		}
		n := int(r.OpsPerSec() * cfg.TrialTime.Seconds())
		ops[w.Name] = min(max(n, cfg.MinOps), cfg.MaxOps)
		cfg.logf("%s: %s: %d operations per trial", dialect, w.Name, ops[w.Name])
	}

	for run := range cfg.Runs {
		for _, w := range cfg.Workloads {
			s := setupFor(w)
			cs := s.contenders
			// Rotate the order from run to run, so that no contender always
			// goes first (into a fresher WAL, a cooler cache).
			k := run % len(cs)
			order := append(slices.Clone(cs[k:]), cs[:k]...)
			for _, c := range order {
				if !applicable(w, c) {
					continue
				}
				r, err := trial(ctx, s.env, w, c, ops[w.Name])
				if err != nil {
					return err
				}
				cell := cells[w.Name+"/"+c.Name()]
				cell.Samples = append(cell.Samples, Sample{
					Run: run, OpsPerSec: r.OpsPerSec(), P50: r.Percentile(50), P99: r.Percentile(99),
					AllocsPerOp: r.AllocsPerOp(), RoundTrips: r.RoundTripsPerOp(),
					Violations: r.Violations, Busy: r.Busy, Problems: r.Problems,
				})
				if r.Violations > 0 {
					cfg.logf("%s: %s/%s: %d violations: %v", dialect, w.Name, c.Name(), r.Violations, r.Problems)
				}
			}
		}
		cfg.logf("%s: run %d of %d done", dialect, run+1, cfg.Runs)
	}
	for _, w := range cfg.Workloads {
		for _, c := range setupFor(w).contenders {
			if cell := cells[w.Name+"/"+c.Name()]; cell != nil {
				rep.Cells = append(rep.Cells, cell)
			}
		}
	}
	return nil
}

// applicable reports whether c can run w: River has no attempts, and its
// stored-size latency is not measured (its table is not prefilled).
func applicable(w perf.Workload, c perf.Contender) bool {
	if w.NeedsLifecycle() {
		_, ok := c.(perf.Lifecycle)
		return ok
	}
	if w.Kind == perf.SubmitStored {
		return c.Name() != "river"
	}
	return true
}

func warmOps(w perf.Workload) int {
	if w.Kind == perf.Storm {
		return perf.StormCallers
	}
	return 2 * max(w.Goroutines, 8)
}

func trial(ctx context.Context, e *perf.Env, w perf.Workload, c perf.Contender, n int) (*perf.Result, error) {
	t, err := perf.Prepare(ctx, e, w, c, n)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", w.Name, c.Name(), err)
	}
	t.Run(ctx)
	return t.Check(ctx), nil
}

// newSchema creates a schema of its own in the database at dsn and returns
// a DSN that uses it, and a function that drops it.
func newSchema(ctx context.Context, dsn string) (string, func(), error) {
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", nil, err
	}
	admin.SetMaxOpenConns(1)
	b := make([]byte, 5)
	rand.Read(b)
	schema := "jobs_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	drop := func() {
		admin.ExecContext(context.WithoutCancel(ctx), `DROP SCHEMA `+schema+` CASCADE`)
		admin.Close()
	}
	return withSearchPath(dsn, schema), drop, nil
}

func withSearchPath(dsn, schema string) string {
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "search_path=" + schema
	}
	return dsn + " search_path=" + schema
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadavg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// WriteFiles writes REPORT.md and ratios.svg into dir.
func (r *Report) WriteFiles(dir, command string) error {
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.Markdown(command)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ratios.svg"), []byte(r.SVG()), 0o644)
}
