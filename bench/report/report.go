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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for schema setup

	"github.com/intentjobs/jobs/bench/peer"
	"github.com/intentjobs/jobs/bench/perf"
)

// Config says what to run.
type Config struct {
	Runs        int           // runs of the whole suite; medians are taken over them
	TrialTime   time.Duration // aimed duration of one trial (one workload, one contender, one run)
	MinOps      int           // at least this many operations per trial
	MaxOps      int           // at most this many operations per trial
	PostgresDSN string        // empty: skip PostgreSQL
	// MySQLDSN is a go-sql-driver/mysql DSN of a MySQL or MariaDB server
	// whose user may create databases: every contender runs in a
	// database of its own, dropped at the end. Empty: skip MySQL.
	MySQLDSN string
	// Synchronous lists the SQLite synchronous settings to measure at,
	// each as a database of its own in the report; empty: skip SQLite.
	Synchronous []string
	River       bool // include River as a peer for the Submit workloads
	TxBaseline  bool // include the four-statement Complete as a second baseline
	// Ablation includes the contenders that price one choice of the
	// library each, on the ablation workloads (perf.Workload.Ablation): the
	// leanest baseline with one choice added (perf.LeanFeatures), and the
	// library with one part switched off (perf.JobsNoChecks, perf.JobsStore).
	Ablation bool
	// AlterLibrary, if set, is SQL run on the library's schema once it is
	// applied (perf.Database.AlterLibrary): an ablation. The report says
	// so before anything else.
	AlterLibrary string
	Workloads    []perf.Workload
	Log          io.Writer
}

// DefaultConfig is what the report command runs.
func DefaultConfig() Config {
	return Config{
		Runs:        5,
		TrialTime:   400 * time.Millisecond,
		MinOps:      200,
		MaxOps:      20_000,
		Synchronous: []string{"FULL", "NORMAL"},
		River:       true,
		TxBaseline:  true,
		Ablation:    true,
		Workloads:   perf.Suite(),
		Log:         os.Stderr,
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
	DB        DB
	Workload  perf.Workload
	Contender string
	Samples   []Sample
}

// DB is one database the suite runs on: PostgreSQL, MySQL (or MariaDB),
// or SQLite at one synchronous setting.
type DB struct {
	Dialect     string
	Synchronous string // SQLite
}

// ID names the database in logs: "postgres", "mysql", "sqlite-full",
// "sqlite-normal".
func (d DB) ID() string {
	if d.Dialect == perf.SQLite {
		return "sqlite-" + strings.ToLower(d.Synchronous)
	}
	return d.Dialect
}

// Title names the database for people.
func (d DB) Title() string {
	if d.Dialect == perf.SQLite {
		return "SQLite, synchronous=" + d.Synchronous
	}
	if d.Dialect == perf.MySQL {
		return "MySQL/MariaDB"
	}
	return "PostgreSQL"
}

// Report is the outcome of Run.
type Report struct {
	Config   Config
	Started  time.Time
	Duration time.Duration
	Machine  Machine
	DBs      []DB
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
	LoadDuring Summary // the 1-minute load average, sampled while the suite ran
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
	for _, s := range cfg.Synchronous {
		rep.DBs = append(rep.DBs, DB{Dialect: perf.SQLite, Synchronous: strings.ToUpper(s)})
	}
	if cfg.PostgresDSN != "" {
		rep.DBs = append(rep.DBs, DB{Dialect: perf.Postgres})
	}
	if cfg.MySQLDSN != "" {
		rep.DBs = append(rep.DBs, DB{Dialect: perf.MySQL})
	}
	load := sampleLoad(10 * time.Second)
	for _, db := range rep.DBs {
		if err := runDB(ctx, cfg, rep, db, dir); err != nil {
			load.stop()
			return nil, fmt.Errorf("%s: %w", db.ID(), err)
		}
	}
	rep.Machine.LoadDuring = summarize(load.stop())
	rep.Machine.LoadAfter = loadavg()
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// setup is a set of contenders, each in a database of its own.
type setup struct {
	contenders []perf.Contender
	cleanups   []func()
}

func (s *setup) close() {
	for _, c := range slices.Backward(s.cleanups) {
		c()
	}
}

// database returns a database of its own for one contender: a new
// PostgreSQL schema or MySQL database, dropped when s closes, or the
// SQLite file at dir/name.db.
func (s *setup) database(ctx context.Context, cfg Config, db DB, dir, name string) (perf.Database, error) {
	if db.Dialect == perf.MySQL {
		dsn, drop, err := newMySQLDatabase(ctx, cfg.MySQLDSN)
		if err != nil {
			return perf.Database{}, err
		}
		s.cleanups = append(s.cleanups, drop)
		return perf.Database{Dialect: perf.MySQL, DSN: dsn}, nil
	}
	if db.Dialect == perf.Postgres {
		dsn, drop, err := newSchema(ctx, cfg.PostgresDSN)
		if err != nil {
			return perf.Database{}, err
		}
		s.cleanups = append(s.cleanups, drop)
		return perf.Database{Dialect: perf.Postgres, DSN: dsn}, nil
	}
	return perf.Database{Dialect: perf.SQLite, DSN: filepath.Join(dir, name+".db"), Synchronous: db.Synchronous}, nil
}

// open adds the contender that open opens on a database of its own.
func (s *setup) open(ctx context.Context, cfg Config, db DB, dir, name string, open func(context.Context, perf.Database) (perf.Contender, error)) error {
	d, err := s.database(ctx, cfg, db, dir, name)
	if err != nil {
		return err
	}
	c, err := open(ctx, d)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.contenders = append(s.contenders, c)
	s.cleanups = append(s.cleanups, func() { c.Close() })
	return nil
}

func openLibrary(alter string) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		d.AlterLibrary = alter
		return perf.OpenLibrary(ctx, d)
	}
}

func openLean(f perf.LeanFeature) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		return perf.OpenLean(ctx, d, f)
	}
}

func openLibraryVariant(name string) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		return perf.OpenLibraryVariant(ctx, d, name)
	}
}

func openCompleteVariant(name string) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		return perf.OpenCompleteVariant(ctx, d, name)
	}
}

func openBaseline(style perf.CompleteStyle) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		return perf.OpenBaseline(ctx, d, style)
	}
}

func openMySQLBaseline(style perf.CompleteStyle) func(context.Context, perf.Database) (perf.Contender, error) {
	return func(ctx context.Context, d perf.Database) (perf.Contender, error) {
		return perf.OpenMySQLBaseline(ctx, d, style)
	}
}

func openMySQLLean(ctx context.Context, d perf.Database) (perf.Contender, error) {
	return perf.OpenMySQLLean(ctx, d)
}

func openMySQLLibrary(ctx context.Context, d perf.Database) (perf.Contender, error) {
	return perf.OpenMySQLLibrary(ctx, d)
}

// openSetup opens the baseline first (it calibrates), then the library,
// then the optional contenders, each in a database of its own whose SQLite
// file is named prefix-contender.
func openSetup(ctx context.Context, cfg Config, db DB, dir, prefix string, all bool) (*setup, error) {
	s := &setup{}
	type opener struct {
		name string
		open func(context.Context, perf.Database) (perf.Contender, error)
		want bool
	}
	if db.Dialect == perf.MySQL {
		// The MySQL store beside its hand-written SQL; River has no MySQL
		// driver, and the ablation's contenders are PostgreSQL's and
		// SQLite's.
		opens := []opener{
			{"sql", openMySQLBaseline(perf.CompleteInOneStatement), true},
			{"sql-lean", openMySQLLean, all},
			{"jobs", openMySQLLibrary, true},
			{"sql-tx", openMySQLBaseline(perf.CompleteInTransaction), all && cfg.TxBaseline},
		}
		for _, o := range opens {
			if !o.want {
				continue
			}
			if err := s.open(ctx, cfg, db, dir, prefix+"-"+o.name, o.open); err != nil {
				s.close()
				return nil, err
			}
		}
		return s, nil
	}
	opens := []opener{
		{"sql", openBaseline(perf.CompleteInOneStatement), true},
		{"sql-lean", openLean(0), all},
		{"jobs", openLibrary(cfg.AlterLibrary), true},
		{"river", peer.OpenRiver, all && cfg.River},
		{"sql-tx", openBaseline(perf.CompleteInTransaction), all && cfg.TxBaseline},
	}
	ablate := all && cfg.Ablation && slices.ContainsFunc(cfg.Workloads, func(w perf.Workload) bool { return w.Ablation })
	for _, f := range perf.LeanFeatures {
		if f.Feature == perf.FileLock && db.Dialect != perf.SQLite {
			continue
		}
		opens = append(opens, opener{"sql-lean+" + f.Name, openLean(f.Feature), ablate})
	}
	for _, v := range perf.CompleteVariants {
		if db.Dialect == perf.Postgres {
			opens = append(opens, opener{v, openCompleteVariant(v), ablate})
		}
	}
	for _, v := range []string{perf.JobsNoChecks, perf.JobsStore, perf.JobsNoNotify} {
		if v == perf.JobsNoNotify && db.Dialect != perf.Postgres {
			continue
		}
		opens = append(opens, opener{v, openLibraryVariant(v), ablate && cfg.AlterLibrary == ""})
	}
	for _, o := range opens {
		if !o.want {
			continue
		}
		if err := s.open(ctx, cfg, db, dir, prefix+"-"+strings.ReplaceAll(o.name, "+", "-"), o.open); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func runDB(ctx context.Context, cfg Config, rep *Report, db DB, dir string) error {
	// One setup for the workloads that do not care how much is stored, and
	// one per stored size, filled once. SQLite's stored files are shared
	// by the synchronous settings, which are a connection's, not a file's.
	main, err := openSetup(ctx, cfg, db, dir, db.ID(), true)
	if err != nil {
		return err
	}
	defer main.close()
	rep.Machine.Databases = appendNew(rep.Machine.Databases, main.contenders[0].(perf.Lifecycle).Tables().Version(ctx))
	setups := map[int]*setup{}
	for _, w := range cfg.Workloads {
		if w.Kind != perf.SubmitStored || setups[w.Stored] != nil {
			continue
		}
		s, err := openSetup(ctx, cfg, db, dir, "stored-"+strconv.Itoa(w.Stored), false)
		if err != nil {
			return err
		}
		defer s.close()
		for _, c := range s.contenders {
			start := time.Now()
			if err := c.(perf.Lifecycle).Tables().FillTo(ctx, w.Stored); err != nil {
				return fmt.Errorf("%s: prefill: %w", c.Name(), err)
			}
			cfg.logf("%s: %s: %d jobs stored in %v", db.ID(), c.Name(), w.Stored, time.Since(start).Round(time.Millisecond))
		}
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
			if c.Runs(w) {
				cells[w.Name+"/"+c.Name()] = &Cell{DB: db, Workload: w, Contender: c.Name()}
				// Warm up every contender: prepared statements, pools,
				// caches.
				if _, err := trial(ctx, w, c, warmOps(w)); err != nil {
					return err
				}
			}
		}
		r, err := trial(ctx, w, s.contenders[0], max(cfg.MinOps/2, calibrationOps(w)))
		if err != nil {
			return err
		}
		n := int(r.OpsPerSec() * cfg.TrialTime.Seconds())
		ops[w.Name] = min(max(n, cfg.MinOps), cfg.MaxOps)
		cfg.logf("%s: %s: %d operations per trial", db.ID(), w.Name, ops[w.Name])
	}

	for run := range cfg.Runs {
		for _, w := range cfg.Workloads {
			cs := slices.DeleteFunc(slices.Clone(setupFor(w).contenders), func(c perf.Contender) bool { return !c.Runs(w) })
			// Rotate the order from run to run, so that no contender always
			// goes first (into a fresher WAL, a cooler cache).
			k := run % len(cs)
			for _, c := range slices.Concat(cs[k:], cs[:k]) {
				r, err := trial(ctx, w, c, ops[w.Name])
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
					cfg.logf("%s: %s/%s: %d violations: %v", db.ID(), w.Name, c.Name(), r.Violations, r.Problems)
				}
			}
		}
		cfg.logf("%s: run %d of %d done (load %s)", db.ID(), run+1, cfg.Runs, loadavg())
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

func appendNew(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

// StoredWarmOps is how many Submits warm each contender up before a
// stored-jobs workload is measured. Those workloads measure a store in
// service, whose caches hold what its writes keep reading: on SQLite, the
// writer's page cache (32 MiB for every contender) over the unique index
// of (owner, key). Each Submit reads a leaf of that index chosen by its
// random key, and 5,000 of them read about as many pages as that cache
// holds, where a few dozen would leave the first runs after opening the
// million-job files measuring how fast a cold cache fills.
const StoredWarmOps = 5000

// warmOps is how many operations warm a contender up for w.
func warmOps(w perf.Workload) int {
	if w.Kind == perf.SubmitStored {
		return StoredWarmOps
	}
	return calibrationOps(w)
}

// calibrationOps is the least the baseline's calibration trial of w runs.
func calibrationOps(w perf.Workload) int {
	if w.Kind == perf.Storm {
		return perf.StormCallers
	}
	return 2 * max(w.Goroutines, 8)
}

func trial(ctx context.Context, w perf.Workload, c perf.Contender, n int) (*perf.Result, error) {
	t, err := perf.Prepare(ctx, w, c, n)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", w.Name, c.Name(), err)
	}
	t.Run(ctx)
	r := t.Check(ctx)
	if cw, ok := c.(perf.ConnWarmer); ok {
		cw.CloseIdleConns()
	}
	return r, nil
}

// newSchema creates a schema of its own in the database at dsn and returns
// a DSN that uses it, and a function that drops it.
func newSchema(ctx context.Context, dsn string) (string, func(), error) {
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", nil, err
	}
	admin.SetMaxOpenConns(1)
	admin.SetMaxIdleConns(0) // a connection per contender, held idle, would count against the server's limit
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

// newMySQLDatabase creates a database of its own on the MySQL server at
// dsn and returns a DSN that uses it, and a function that drops it.
func newMySQLDatabase(ctx context.Context, dsn string) (string, func(), error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("mysql dsn: %w", err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", nil, err
	}
	admin.SetMaxOpenConns(1)
	admin.SetMaxIdleConns(0)
	b := make([]byte, 5)
	rand.Read(b)
	name := "jobs_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		admin.ExecContext(context.WithoutCancel(ctx), `DROP DATABASE IF EXISTS `+name)
		admin.Close()
	}
	cfg.DBName = name
	return cfg.FormatDSN(), drop, nil
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

// loadSampler reads the 1-minute load average at intervals.
type loadSampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	samples []float64
}

func sampleLoad(every time.Duration) *loadSampler {
	s := &loadSampler{done: make(chan struct{})}
	read := func() {
		if f := strings.Fields(loadavg()); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				s.samples = append(s.samples, v)
			}
		}
	}
	read()
	s.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				read()
			case <-s.done:
				read()
				return
			}
		}
	})
	return s
}

// stop ends the sampling and returns the samples.
func (s *loadSampler) stop() []float64 {
	close(s.done)
	s.wg.Wait()
	return s.samples
}

// MergeInto merges the report's databases into dir/REPORT.md (see Merge)
// and leaves dir/ratios.svg as it is.
func (r *Report) MergeInto(dir, command string) error {
	path := filepath.Join(dir, "REPORT.md")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	md, err := Merge(string(old), r.Markdown(command))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(md), 0o644)
}

// WriteFiles writes REPORT.md and ratios.svg into dir.
func (r *Report) WriteFiles(dir, command string) error {
	if err := os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.Markdown(command)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ratios.svg"), []byte(r.SVG()), 0o644)
}
