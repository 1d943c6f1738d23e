package perf

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentjobs/jobs"
)

// Kind is what a workload does.
type Kind int

// Workload kinds.
const (
	SubmitNew    Kind = iota // Submit with a new key each time
	Storm                    // StormCallers goroutines Submit one key at once, then the next key
	Replay                   // Submit keys that exist (all duplicates)
	StartRunning             // StartAttempt + MarkRunning on pending jobs
	Complete                 // two running attempts per job Complete at once
	SubmitStored             // Submit with a new key, one goroutine, Stored jobs already in the table
)

// StormCallers is how many goroutines submit each key of a Storm at once.
const StormCallers = 64

// Workload is one benchmark.
type Workload struct {
	Name       string // short, for benchmark and table names
	Title      string // for people
	Kind       Kind
	Goroutines int
	Stored     int // SubmitStored: jobs in the table before measuring
}

// Suite returns the workloads, in the order they are reported.
func Suite() []Workload {
	return []Workload{
		{Name: "submit-new-g1", Title: "Submit, new key, 1 goroutine", Kind: SubmitNew, Goroutines: 1},
		{Name: "submit-new-g16", Title: "Submit, new key, 16 goroutines", Kind: SubmitNew, Goroutines: 16},
		{Name: "submit-new-g64", Title: "Submit, new key, 64 goroutines", Kind: SubmitNew, Goroutines: 64},
		{Name: "storm-g64", Title: "Duplicate storm, 64 goroutines per key", Kind: Storm, Goroutines: StormCallers},
		{Name: "replay-g16", Title: "Replay of existing keys, 16 goroutines", Kind: Replay, Goroutines: 16},
		{Name: "start-running-g16", Title: "StartAttempt + MarkRunning, 16 goroutines", Kind: StartRunning, Goroutines: 16},
		{Name: "complete-race-g16", Title: "Complete, 2 attempts racing per job, 8 jobs at once", Kind: Complete, Goroutines: 16},
		{Name: "submit-stored-10k", Title: "Submit latency, 10,000 jobs stored", Kind: SubmitStored, Goroutines: 1, Stored: 10_000},
		{Name: "submit-stored-1m", Title: "Submit latency, 1,000,000 jobs stored", Kind: SubmitStored, Goroutines: 1, Stored: 1_000_000},
	}
}

// NeedsLifecycle reports whether the workload runs attempts, which only a
// Lifecycle contender can.
func (w Workload) NeedsLifecycle() bool { return w.Kind == StartRunning || w.Kind == Complete }

// Result is what one run of a workload measured.
type Result struct {
	Ops        int
	Elapsed    time.Duration
	Latencies  []time.Duration // one per operation, sorted
	Violations int             // broken invariants or failed operations
	Busy       int             // of which "database is locked"
	Problems   []string        // the first few violations, for people
	RoundTrips int64           // PostgreSQL requests sent during the run
	Mallocs    uint64          // heap allocations during the run (whole process)
}

// OpsPerSec is the throughput.
func (r *Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Percentile returns the p-th percentile latency (0 < p <= 100).
func (r *Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies))*p/100+0.5) - 1
	return r.Latencies[min(max(i, 0), len(r.Latencies)-1)]
}

// AllocsPerOp is heap allocations per operation.
func (r *Result) AllocsPerOp() float64 {
	if r.Ops == 0 {
		return 0
	}
	return float64(r.Mallocs) / float64(r.Ops)
}

// RoundTripsPerOp is PostgreSQL round trips per operation.
func (r *Result) RoundTripsPerOp() float64 {
	if r.Ops == 0 {
		return 0
	}
	return float64(r.RoundTrips) / float64(r.Ops)
}

func (r *Result) violation(err error, format string, args ...any) {
	r.Violations++
	if err != nil && isBusy(err) {
		r.Busy++
	}
	if len(r.Problems) < 5 {
		msg := fmt.Sprintf(format, args...)
		if err != nil {
			msg += ": " + err.Error()
		}
		r.Problems = append(r.Problems, msg)
	}
}

func isBusy(err error) bool {
	var se *jobs.StorageError
	if errors.As(err, &se) && se.Kind == jobs.StorageBusy {
		return true
	}
	return strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY")
}

// Trial is a workload prepared for one contender with its data in place.
type Trial struct {
	W     Workload
	C     Contender
	env   *Env
	n     int
	owner string
	keys  []string
	ids   []string    // Replay: the keys' job IDs; StartRunning: pending jobs
	pairs [][2]string // Complete: racing attempts per job
	res   *Result

	mu      sync.Mutex
	perCall [][]callResult // Storm: per round
	winners []atomic.Int32 // Complete: per job
}

type callResult struct {
	id      string
	created bool
	err     error
}

// Prepare sets up a trial of about n operations of w for c on e: new keys,
// existing keys, pending jobs or racing attempts, written with set-based SQL
// where there are many. Nothing of it is timed.
func Prepare(ctx context.Context, e *Env, w Workload, c Contender, n int) (*Trial, error) {
	n = max(n, 1)
	t := &Trial{W: w, C: c, env: e, n: n, owner: c.Name() + "-" + randomHex(6)}
	switch w.Kind {
	case SubmitStored:
		if err := e.FillTo(ctx, w.Stored); err != nil {
			return nil, err
		}
		t.keys = keys(t.owner, n)
	case SubmitNew:
		t.keys = keys(t.owner, n)
	case Storm:
		t.n = max(1, n/StormCallers) * StormCallers
		t.keys = keys(t.owner, t.n/StormCallers)
	case Replay:
		t.keys = keys(t.owner, min(n, 1000))
		t.ids = make([]string, len(t.keys))
		for i, k := range t.keys {
			id, _, err := c.Submit(ctx, t.owner, k)
			if err != nil {
				return nil, fmt.Errorf("prepare replay: %w", err)
			}
			t.ids[i] = id
		}
	case StartRunning:
		if _, err := e.Fill(ctx, t.owner, n, "pending"); err != nil {
			return nil, err
		}
		ids, err := e.jobIDs(ctx, t.owner)
		if err != nil {
			return nil, err
		}
		t.ids = ids
	case Complete:
		jobsN := max(1, n/2)
		t.n = 2 * jobsN
		pairs, err := e.FillRaces(ctx, t.owner, jobsN)
		if err != nil {
			return nil, err
		}
		t.pairs = pairs
		t.winners = make([]atomic.Int32, jobsN)
	}
	if w.NeedsLifecycle() {
		if _, ok := c.(Lifecycle); !ok {
			return nil, fmt.Errorf("%s cannot run %s", c.Name(), w.Name)
		}
	}
	return t, nil
}

func keys(owner string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = owner + "-k" + strconv.Itoa(i)
	}
	return out
}

// Run performs the trial's operations and measures them. Call it once.
func (t *Trial) Run(ctx context.Context) *Result {
	r := &Result{Ops: t.n, Latencies: make([]time.Duration, t.n)}
	t.res = r
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	trips := t.env.RoundTrips()
	start := time.Now()
	switch t.W.Kind {
	case SubmitNew, SubmitStored:
		t.parallel(func(i int) error {
			_, created, err := t.C.Submit(ctx, t.owner, t.keys[i])
			if err == nil && !created {
				err = errors.New("new key reported as existing")
			}
			return err
		})
	case Replay:
		t.parallel(func(i int) error {
			k := i % len(t.keys)
			id, created, err := t.C.Submit(ctx, t.owner, t.keys[k])
			if err == nil && (created || id != t.ids[k]) {
				err = fmt.Errorf("replay of %s: created=%v id=%s, want %s", t.keys[k], created, id, t.ids[k])
			}
			return err
		})
	case StartRunning:
		lc := t.C.(Lifecycle)
		t.parallel(func(i int) error {
			_, err := lc.StartRunning(ctx, t.ids[i])
			return err
		})
	case Storm:
		t.storm(ctx)
	case Complete:
		t.race(ctx)
	}
	r.Elapsed = time.Since(start)
	r.RoundTrips = t.env.RoundTrips() - trips
	runtime.ReadMemStats(&ms)
	r.Mallocs = ms.Mallocs - mallocs
	return r
}

// parallel runs op(0) … op(n-1) on the workload's goroutines.
func (t *Trial) parallel(op func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range t.W.Goroutines {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= t.n {
					return
				}
				t0 := time.Now()
				err := op(i)
				t.res.Latencies[i] = time.Since(t0)
				if err != nil {
					t.fail(err, "operation %d", i)
				}
			}
		})
	}
	wg.Wait()
}

func (t *Trial) fail(err error, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.res.violation(err, format, args...)
}

// storm submits each key from StormCallers goroutines released together.
func (t *Trial) storm(ctx context.Context) {
	t.perCall = make([][]callResult, len(t.keys))
	for round, key := range t.keys {
		calls := make([]callResult, StormCallers)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for g := range StormCallers {
			wg.Go(func() {
				<-release
				t0 := time.Now()
				id, created, err := t.C.Submit(ctx, t.owner, key)
				t.res.Latencies[round*StormCallers+g] = time.Since(t0)
				calls[g] = callResult{id, created, err}
			})
		}
		close(release)
		wg.Wait()
		t.perCall[round] = calls
	}
}

// race completes both attempts of each job at once, on Goroutines/2 jobs
// at a time.
func (t *Trial) race(ctx context.Context) {
	lc := t.C.(Lifecycle)
	var next atomic.Int64
	var wg sync.WaitGroup
	complete := func(j, side int) {
		t0 := time.Now()
		won, err := lc.Complete(ctx, t.pairs[j][side])
		t.res.Latencies[2*j+side] = time.Since(t0)
		if err != nil {
			t.fail(err, "complete %s", t.pairs[j][side])
		}
		if won {
			t.winners[j].Add(1)
		}
	}
	for range max(1, t.W.Goroutines/2) {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= len(t.pairs) {
					return
				}
				var other sync.WaitGroup
				other.Go(func() { complete(j, 1) })
				complete(j, 0)
				other.Wait()
			}
		})
	}
	wg.Wait()
}

// Check verifies what the run wrote and adds what it finds to the result's
// violations: one job per storm key and every caller the same ID; exactly one
// winner per raced job, in memory and in the database; every started attempt
// running. It sorts the latencies. Nothing of it is timed.
func (t *Trial) Check(ctx context.Context) *Result {
	r := t.res
	slices.Sort(r.Latencies)
	switch t.W.Kind {
	case Storm:
		for round, calls := range t.perCall {
			created := 0
			for g, c := range calls {
				if c.err != nil {
					r.violation(c.err, "storm key %d caller %d", round, g)
					continue
				}
				if c.created {
					created++
				}
				if c.id != calls[0].id {
					r.violation(nil, "storm key %d: caller %d got %s, caller 0 got %s", round, g, c.id, calls[0].id)
				}
			}
			if created != 1 {
				r.violation(nil, "storm key %d: %d callers created the job, want 1", round, created)
			}
		}
		t.expectJobs(ctx, r, len(t.keys))
	case Complete:
		for j := range t.winners {
			if w := t.winners[j].Load(); w != 1 {
				r.violation(nil, "job of %s: %d winners, want 1", t.pairs[j][0], w)
			}
		}
		t.expectCount(ctx, r, `SELECT count(*) FROM jobs WHERE owner = $1 AND state = 'succeeded'
            AND completed_by IS NOT NULL AND version = 2`, len(t.pairs), "succeeded jobs")
		t.expectCount(ctx, r, `SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id
            WHERE j.owner = $1 AND a.state = 'succeeded' AND a.id = j.completed_by`, len(t.pairs), "winning attempts")
		t.expectCount(ctx, r, `SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id
            WHERE j.owner = $1 AND a.state = 'lost'`, len(t.pairs), "losing attempts")
	case StartRunning:
		t.expectCount(ctx, r, `SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id
            WHERE j.owner = $1 AND a.state = 'running' AND j.state = 'running'`, t.n, "running attempts")
	case SubmitNew, SubmitStored:
		t.expectJobs(ctx, r, t.n)
	}
	return r
}

// JobCounter is implemented by contenders that keep their jobs somewhere
// other than the jobs table (a peer's own table).
type JobCounter interface {
	CountJobs(ctx context.Context, owner string) (int, error)
}

// expectJobs checks that owner has exactly want jobs.
func (t *Trial) expectJobs(ctx context.Context, r *Result, want int) {
	jc, ok := t.C.(JobCounter)
	if !ok {
		t.expectCount(ctx, r, `SELECT count(*) FROM jobs WHERE owner = $1`, want, "jobs")
		return
	}
	got, err := jc.CountJobs(ctx, t.owner)
	if err != nil {
		r.violation(err, "count jobs")
	} else if got != want {
		r.violation(nil, "%d jobs, want %d", got, want)
	}
}

func (t *Trial) expectCount(ctx context.Context, r *Result, query string, want int, what string) {
	var got int
	if err := t.env.Reads.QueryRowContext(ctx, t.env.q(query), t.owner).Scan(&got); err != nil {
		r.violation(err, "count %s", what)
		return
	}
	if got != want {
		r.violation(nil, "%d %s, want %d", got, what, want)
	}
}
