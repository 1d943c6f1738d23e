package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
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
	SubmitStored             // Submit with a new key for one of StoredOwners owners, Stored jobs already in the table
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
	// Size is the request's size in bytes, roughly (Size100B, Size1KB,
	// Size10KB); 0 is Size1KB.
	Size int
	// Ablation marks the workloads that the contenders pricing one choice
	// of the library each (Lean with features) run.
	Ablation bool
}

// Suite returns the workloads, in the order they are reported.
func Suite() []Workload {
	return []Workload{
		{Name: "submit-new-100b-g1", Title: "Submit, new key, ~100 B, 1 goroutine", Kind: SubmitNew, Goroutines: 1, Size: Size100B},
		{Name: "submit-new-100b-g16", Title: "Submit, new key, ~100 B, 16 goroutines", Kind: SubmitNew, Goroutines: 16, Size: Size100B},
		{Name: "submit-new-100b-g64", Title: "Submit, new key, ~100 B, 64 goroutines", Kind: SubmitNew, Goroutines: 64, Size: Size100B},
		{Name: "submit-new-g1", Title: "Submit, new key, 1 goroutine", Kind: SubmitNew, Goroutines: 1, Ablation: true},
		{Name: "submit-new-g16", Title: "Submit, new key, 16 goroutines", Kind: SubmitNew, Goroutines: 16, Ablation: true},
		{Name: "submit-new-g64", Title: "Submit, new key, 64 goroutines", Kind: SubmitNew, Goroutines: 64},
		{Name: "submit-new-10kb-g1", Title: "Submit, new key, ~10 KB, 1 goroutine", Kind: SubmitNew, Goroutines: 1, Size: Size10KB},
		{Name: "submit-new-10kb-g16", Title: "Submit, new key, ~10 KB, 16 goroutines", Kind: SubmitNew, Goroutines: 16, Size: Size10KB},
		{Name: "submit-new-10kb-g64", Title: "Submit, new key, ~10 KB, 64 goroutines", Kind: SubmitNew, Goroutines: 64, Size: Size10KB},
		{Name: "storm-g64", Title: "Duplicate storm, 64 goroutines per key", Kind: Storm, Goroutines: StormCallers},
		{Name: "replay-g16", Title: "Replay of existing keys, 16 goroutines", Kind: Replay, Goroutines: 16, Ablation: true},
		{Name: "start-running-g16", Title: "StartAttempt + MarkRunning, 16 goroutines", Kind: StartRunning, Goroutines: 16},
		{Name: "complete-race-g16", Title: "Complete, 2 attempts racing per job, 8 jobs at once", Kind: Complete, Goroutines: 16, Ablation: true},
		{Name: "submit-stored-10k", Title: "Submit latency, 10,000 jobs stored", Kind: SubmitStored, Goroutines: 1, Stored: 10_000},
		{Name: "submit-stored-1m", Title: "Submit latency, 1,000,000 jobs stored", Kind: SubmitStored, Goroutines: 1, Stored: 1_000_000},
	}
}

// NeedsLifecycle reports whether the workload runs attempts, which only a
// Lifecycle contender can.
func (w Workload) NeedsLifecycle() bool { return w.Kind == StartRunning || w.Kind == Complete }

// NeedsTables reports whether the workload prefills or reads back the
// contender's jobs and attempts tables, which only a Lifecycle contender
// has.
func (w Workload) NeedsTables() bool { return w.NeedsLifecycle() || w.Kind == SubmitStored }

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
	W      Workload
	C      Contender
	n      int
	owner  string   // the owner of every request, except in SubmitStored
	owners []string // SubmitStored: the owner of each request
	keys   []string
	params []json.RawMessage // per key
	ids    []string          // Replay: the keys' job IDs; StartRunning: pending jobs
	pairs  [][2]string       // Complete: racing attempts per job
	stored int               // SubmitStored: jobs stored before the run
	res    *Result

	mu      sync.Mutex
	got     []string             // SubmitNew, SubmitStored: the ID each request returned
	perCall [][]callResult       // Storm: per round
	results [][2]json.RawMessage // Complete: what each attempt offers
	winners []atomic.Int32       // Complete: per job
}

type callResult struct {
	id      string
	created bool
	err     error
}

// Prepare sets up a trial of about n operations of w for c: new keys and
// their parameters, existing keys, pending jobs or racing attempts, written
// with set-based SQL where there are many. A SubmitStored workload needs
// c's tables filled to w.Stored first (Tables.FillTo), once: filling and
// settling a million jobs is not a trial's work. Nothing of it is timed.
func Prepare(ctx context.Context, w Workload, c Contender, n int) (*Trial, error) {
	if !c.Runs(w) {
		return nil, fmt.Errorf("%s does not run %s", c.Name(), w.Name)
	}
	var lc Lifecycle
	if w.NeedsTables() {
		var ok bool
		if lc, ok = c.(Lifecycle); !ok {
			return nil, fmt.Errorf("%s cannot run %s", c.Name(), w.Name)
		}
	}
	n = max(n, 1)
	if cw, ok := c.(ConnWarmer); ok {
		if err := cw.WarmConns(ctx, w.Goroutines); err != nil {
			return nil, fmt.Errorf("%s: open connections: %w", c.Name(), err)
		}
	}
	t := &Trial{W: w, C: c, n: n, owner: c.Name() + "-" + randomHex(6)}
	var err error
	switch w.Kind {
	case SubmitStored:
		if t.stored, err = lc.Tables().Count(ctx); err != nil {
			return nil, err
		}
		if t.stored < w.Stored {
			return nil, fmt.Errorf("%s: %d jobs stored, want %d: fill the tables first", w.Name, t.stored, w.Stored)
		}
		if _, err := lc.Tables().Warm(ctx); err != nil {
			return nil, err
		}
		t.newKeys(n)
		t.owners = make([]string, n)
		for i := range t.owners {
			t.owners[i] = StoredOwner(rand.IntN(StoredOwners))
		}
		t.got = make([]string, n)
	case SubmitNew:
		t.newKeys(n)
		t.got = make([]string, n)
	case Storm:
		t.n = max(1, n/StormCallers) * StormCallers
		t.newKeys(t.n / StormCallers)
	case Replay:
		t.newKeys(min(n, 1000))
		t.ids = make([]string, len(t.keys))
		for i, k := range t.keys {
			if t.ids[i], _, err = c.Submit(ctx, t.owner, k, t.params[i]); err != nil {
				return nil, fmt.Errorf("prepare replay: %w", err)
			}
		}
	case StartRunning:
		if t.ids, err = lc.Tables().FillPending(ctx, t.owner, n); err != nil {
			return nil, err
		}
	case Complete:
		jobsN := max(1, n/2)
		t.n = 2 * jobsN
		if t.pairs, err = lc.Tables().FillRaces(ctx, t.owner, jobsN); err != nil {
			return nil, err
		}
		t.results = make([][2]json.RawMessage, len(t.pairs))
		for j, p := range t.pairs {
			t.results[j] = [2]json.RawMessage{ResultFor(p[0]), ResultFor(p[1])}
		}
		t.winners = make([]atomic.Int32, len(t.pairs))
	}
	return t, nil
}

// newKeys makes n random keys and their parameters.
func (t *Trial) newKeys(n int) {
	t.keys = make([]string, n)
	t.params = make([]json.RawMessage, n)
	for i := range t.keys {
		t.keys[i] = NewKey()
		t.params[i] = SizedParamsFor(t.W.Size, t.keys[i])
	}
}

// Run performs the trial's operations and measures them. Call it once.
func (t *Trial) Run(ctx context.Context) *Result {
	r := &Result{Ops: t.n, Latencies: make([]time.Duration, t.n)}
	t.res = r
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	trips := t.C.RoundTrips()
	start := time.Now()
	switch t.W.Kind {
	case SubmitNew, SubmitStored:
		t.parallel(func(i int) (err error) {
			owner := t.owner
			if t.owners != nil {
				owner = t.owners[i]
			}
			var created bool
			t.got[i], created, err = t.C.Submit(ctx, owner, t.keys[i], t.params[i])
			if err == nil && !created {
				err = errors.New("new key reported as existing")
			}
			return err
		})
	case Replay:
		t.parallel(func(i int) error {
			k := i % len(t.keys)
			id, created, err := t.C.Submit(ctx, t.owner, t.keys[k], t.params[k])
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
	r.RoundTrips = t.C.RoundTrips() - trips
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
		params := t.params[round]
		calls := make([]callResult, StormCallers)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for g := range StormCallers {
			wg.Go(func() {
				<-release
				t0 := time.Now()
				id, created, err := t.C.Submit(ctx, t.owner, key, params)
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
		won, err := lc.Complete(ctx, t.pairs[j][side], t.results[j][side])
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
// violations: every new key one new job; one job per storm key and every
// caller the same ID; exactly one winner per raced job, in memory and in the
// tables, which keep the winner's result and no other; every started
// attempt running. It sorts the latencies. Nothing of it is timed.
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
		t.checkRaces(ctx, r)
	case StartRunning:
		states, err := t.C.(Lifecycle).Tables().AttemptStates(ctx, t.owner)
		if err != nil {
			r.violation(err, "count attempts")
		} else if states["running"] != t.n || len(states) != 1 {
			r.violation(nil, "attempts by state %v, want %d running", states, t.n)
		}
	case SubmitNew:
		t.expectDistinct(r)
		t.expectJobs(ctx, r, t.n)
	case SubmitStored:
		t.expectDistinct(r)
		got, err := t.C.(Lifecycle).Tables().Count(ctx)
		if err != nil {
			r.violation(err, "count jobs")
		} else if got != t.stored+t.n {
			r.violation(nil, "%d jobs stored after %d new keys, want %d", got, t.n, t.stored+t.n)
		}
	}
	return r
}

// checkRaces checks that every raced job has one winner, in memory and in
// the tables, and keeps that winner's result; and that its other attempt
// lost.
func (t *Trial) checkRaces(ctx context.Context, r *Result) {
	for j := range t.winners {
		if w := t.winners[j].Load(); w != 1 {
			r.violation(nil, "job of %s: %d winners, want 1", t.pairs[j][0], w)
		}
	}
	tables := t.C.(Lifecycle).Tables()
	outcomes, err := tables.Outcomes(ctx, t.owner)
	if err != nil {
		r.violation(err, "read jobs")
		return
	}
	if len(outcomes) != len(t.pairs) {
		r.violation(nil, "%d raced jobs stored, want %d", len(outcomes), len(t.pairs))
		return
	}
	for j, o := range outcomes {
		side := slices.Index(t.pairs[j][:], o.CompletedBy)
		switch {
		case o.State != "succeeded" || o.Version != 2:
			r.violation(nil, "job %s: state %s at version %d, want succeeded at 2", o.JobID, o.State, o.Version)
		case side < 0:
			r.violation(nil, "job %s: completed by %q, not one of its attempts %v", o.JobID, o.CompletedBy, t.pairs[j])
		case !sameJSON(o.Result, t.results[j][side]):
			r.violation(nil, "job %s: stores a result that is not its winner's", o.JobID)
		}
	}
	states, err := tables.AttemptStates(ctx, t.owner)
	if err != nil {
		r.violation(err, "count attempts")
	} else if states["succeeded"] != len(t.pairs) || states["lost"] != len(t.pairs) || len(states) != 2 {
		r.violation(nil, "attempts by state %v, want %d succeeded and %d lost", states, len(t.pairs), len(t.pairs))
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a string, b json.RawMessage) bool {
	var va, vb any
	return json.Unmarshal([]byte(a), &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

// expectDistinct checks that no two new keys got the same job.
func (t *Trial) expectDistinct(r *Result) {
	seen := make(map[string]bool, len(t.got))
	for i, id := range t.got {
		if id == "" {
			continue // failed, and counted as such
		}
		if seen[id] {
			r.violation(nil, "key %d got job %s, which another new key got too", i, id)
		}
		seen[id] = true
	}
}

// expectJobs checks that the trial's owner has exactly want jobs.
func (t *Trial) expectJobs(ctx context.Context, r *Result, want int) {
	got, err := t.C.CountJobs(ctx, t.owner)
	if err != nil {
		r.violation(err, "count jobs")
	} else if got != want {
		r.violation(nil, "%d jobs, want %d", got, want)
	}
}
