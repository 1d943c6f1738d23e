package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// envSoak, set to a number, multiplies the size of the heavy tests.
const envSoak = "JOBS_SOAK"

func soak() int {
	n, err := strconv.Atoi(os.Getenv(envSoak))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// envSeed fixes the seed of the seeded tests, to replay a failure.
const envSeed = "JOBS_SEED"

func seed(t testing.TB) uint64 {
	t.Helper()
	s, err := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	if err != nil {
		s = rand.Uint64() % 1_000_000
	}
	t.Logf("seed %d (replay with %s=%d)", s, envSeed, s)
	return s
}

// ledger is what the callers were told, to compare with what the store holds.
type ledger struct {
	mu       sync.Mutex
	jobOfKey map[string]string // owner/key -> job ID returned by Submit
	winner   map[string]string // job ID -> the attempt whose Complete returned success
	problems []string
	retried  atomic.Int64 // storage errors callers saw and retried
}

func newLedger() *ledger {
	return &ledger{jobOfKey: map[string]string{}, winner: map[string]string{}}
}

func (l *ledger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *ledger) submitted(owner, key, jobID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := owner + "/" + key
	if prev, ok := l.jobOfKey[k]; ok && prev != jobID {
		l.problems = append(l.problems, fmt.Sprintf("duplicate job for %s: %s and %s", k, prev, jobID))
	}
	l.jobOfKey[k] = jobID
}

func (l *ledger) won(jobID, attemptID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.winner[jobID]; ok && prev != attemptID {
		l.problems = append(l.problems, fmt.Sprintf("double completion of %s: %s and %s", jobID, prev, attemptID))
	}
	l.winner[jobID] = attemptID
}

func resultOf(attemptID string) json.RawMessage {
	return json.RawMessage(`{"attempt":"` + attemptID + `"}`)
}

// expected reports whether err is one of the answers a racing caller may get.
func expected(err error, allowed ...error) bool {
	if err == nil {
		return true
	}
	for _, a := range allowed {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

// workload drives m with mixed operations on a few shared keys, like a
// client and a reconciler that retry on storage errors, and records in l
// what they were told.
type workload struct {
	m     *jobs.Manager
	rng   *rand.Rand
	l     *ledger
	keys  int
	iters int
	tries int
	pause time.Duration // between retries (0: none)
	stop  *atomic.Bool  // if set, ends the run early
}

// retry is retryStorage with the workload's tries and pause.
func (w *workload) retry(fn func() error) error {
	var err error
	for range w.tries {
		if err = fn(); !errors.Is(err, jobs.ErrStorage) {
			return err
		}
		w.l.retried.Add(1)
		if w.pause > 0 {
			time.Sleep(w.pause)
		}
	}
	return err
}

func (w *workload) run(ctx context.Context) {
	for i := range w.iters {
		if w.stop != nil && w.stop.Load() {
			return
		}
		owner := fmt.Sprintf("owner-%d", w.rng.IntN(2))
		key := fmt.Sprintf("key-%d", w.rng.IntN(w.keys))
		w.step(ctx, i, owner, key)
	}
}

func (w *workload) step(ctx context.Context, i int, owner, key string) {
	var j jobs.Job
	err := w.retry(func() (err error) {
		j, _, err = w.m.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "p1", Params: json.RawMessage(`{"amount": 1}`)})
		return err
	})
	if err != nil {
		w.l.problem("submit %s/%s: %v", owner, key, err)
		return
	}
	w.l.submitted(owner, key, j.ID)
	if j.State.Terminal() {
		return
	}
	var a jobs.Attempt
	err = w.retry(func() (err error) {
		a, err = w.m.StartAttempt(ctx, j.ID, "")
		return err
	})
	var inFlight *jobs.AttemptInFlightError
	switch {
	case errors.As(err, &inFlight):
		// A reconciler's part: settle the attempt in the way.
		w.finish(ctx, j.ID, inFlight.AttemptID)
		return
	case errors.Is(err, jobs.ErrJobClosed):
		return
	case err != nil:
		w.l.problem("start attempt on %s: %v", j.ID, err)
		return
	}
	if w.rng.IntN(10) < 7 {
		err = w.retry(func() error {
			_, err := w.m.MarkRunning(ctx, a.ID, "ref-"+a.ID)
			return err
		})
		if !expected(err, jobs.ErrInvalidTransition) {
			w.l.problem("mark running %s: %v", a.ID, err)
		}
	}
	if w.rng.IntN(10) < 2 {
		err = w.retry(func() error {
			_, err := w.m.MarkUnknown(ctx, a.ID, "timeout")
			return err
		})
		if !expected(err, jobs.ErrInvalidTransition, jobs.ErrAttemptInFlight) {
			w.l.problem("mark unknown %s: %v", a.ID, err)
		}
	}
	w.finish(ctx, j.ID, a.ID)
}

// finish records an outcome for the attempt, or closes its job.
func (w *workload) finish(ctx context.Context, jobID, attemptID string) {
	var err error
	switch r := w.rng.IntN(100); {
	case r < 60:
		var j jobs.Job
		err = w.retry(func() (err error) {
			j, err = w.m.Complete(ctx, attemptID, resultOf(attemptID))
			return err
		})
		if err == nil {
			w.l.won(jobID, attemptID)
			if j.CompletedBy != attemptID || string(j.Result) != string(resultOf(attemptID)) {
				w.l.problem("complete %s returned job completed by %s with %s", attemptID, j.CompletedBy, j.Result)
			}
		}
		if !expected(err, jobs.ErrLostRace, jobs.ErrJobClosed, jobs.ErrInvalidTransition) {
			w.l.problem("complete %s: %v", attemptID, err)
		}
	case r < 75:
		err = w.retry(func() error { _, err := w.m.Fail(ctx, attemptID, "provider said no"); return err })
		if !expected(err, jobs.ErrInvalidTransition) {
			w.l.problem("fail %s: %v", attemptID, err)
		}
	case r < 85:
		err = w.retry(func() error { _, err := w.m.Cancel(ctx, attemptID, "never sent"); return err })
		if !expected(err, jobs.ErrInvalidTransition) {
			w.l.problem("cancel %s: %v", attemptID, err)
		}
	case r < 95:
		err = w.retry(func() error { _, err := w.m.CancelJob(ctx, jobID, "user cancelled"); return err })
		if !expected(err, jobs.ErrJobClosed) {
			w.l.problem("cancel job %s: %v", jobID, err)
		}
	default:
		err = w.retry(func() error { _, err := w.m.FailJob(ctx, jobID, "gave up"); return err })
		if !expected(err, jobs.ErrJobClosed, jobs.ErrAttemptInFlight) {
			w.l.problem("fail job %s: %v", jobID, err)
		}
	}
}

// TestInjectedFaults runs concurrent mixed operations through a store that
// fails before and after its writes (ambiguous commits), and checks that
// retrying callers never get a duplicate job or a double completion, that
// every winner they were told of is the one stored with its own result, and
// that the store breaks no invariant.
func TestInjectedFaults(t *testing.T) {
	t.Parallel()
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			store := d.open(t)
			rec := jobstest.NewRecorder(t) // JOBS_HISTORY_DIR: the callers' view, faults and all
			base := seed(t)
			const workers = 4
			iters := 220 * soak()
			l := newLedger()
			var fss []*faultstore.Store
			stopWatch := watchTransitions(t, store, 250*time.Millisecond)
			var wg sync.WaitGroup
			for i := range workers {
				fs := faultstore.New(store, faultstore.Config{Seed: base*100 + uint64(i), Rate: 0.5, AfterShare: 0.5})
				fss = append(fss, fs)
				w := &workload{
					m:     jobstest.NewManager(t, rec.Store(fs, fmt.Sprintf("worker-%d", i)), jobs.Options{}),
					rng:   rand.New(rand.NewPCG(base, uint64(i))),
					l:     l,
					keys:  200 * soak(),
					iters: iters,
					tries: 60,
				}
				wg.Go(func() { w.run(t.Context()) })
			}
			wg.Wait()
			stopWatch()

			faults, after, calls := 0, 0, 0
			for _, fs := range fss {
				st := fs.Stats()
				faults += st.Total()
				after += st.TotalKind(faultstore.After)
				for _, n := range st.Calls {
					calls += n
				}
			}
			t.Logf("%s: %d workers x %d operations, %d store calls, %d faults injected (%d after the write)",
				d.name, workers, iters, calls, faults, after)
			if faults < 1000*soak() {
				t.Errorf("only %d faults injected, want at least %d", faults, 1000*soak())
			}
			checkLedger(t, store, l)
		})
	}
}

// checkLedger compares what callers were told with what store holds.
func checkLedger(t *testing.T, store testdb.Store, l *ledger) {
	t.Helper()
	for _, p := range l.problems {
		t.Error(p)
	}
	ctx := context.Background()
	for k, id := range l.jobOfKey {
		owner, key, _ := strings.Cut(k, "/")
		j, err := store.JobByKey(ctx, owner, key)
		if err != nil || j.ID != id {
			t.Errorf("submission of %s lost: store has %s (%v), caller was told %s", k, j.ID, err, id)
		}
	}
	for jobID, att := range l.winner {
		j, err := store.Job(ctx, jobID)
		if err != nil {
			t.Errorf("job %s: %v", jobID, err)
			continue
		}
		if j.CompletedBy != att || string(j.Result) != string(resultOf(att)) {
			t.Errorf("job %s: caller was told %s won, store says %q with %s", jobID, att, j.CompletedBy, j.Result)
		}
	}
	snap := assertInvariants(t, store)
	completed := 0
	for _, j := range snap.Jobs {
		if j.State == jobs.JobSucceeded {
			completed++
			if string(j.Result) != string(resultOf(j.CompletedBy)) {
				t.Errorf("job %s holds %s, not its winner's result", j.ID, j.Result)
			}
		}
	}
	t.Logf("%d jobs, %d succeeded, %d winners reported to callers, 0 problems expected, %d found", len(snap.Jobs), completed, len(l.winner), len(l.problems))
}
