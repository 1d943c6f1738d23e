package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// A test binary re-executed with envChildRole set runs a child's part
// instead of the tests; the other variables tell it what to do.
const (
	envChildRole    = "JOBS_RELIABILITY_CHILD"
	envChildDialect = "JOBS_RELIABILITY_DIALECT"
	envChildDSN     = "JOBS_RELIABILITY_DSN"
	envChildArgs    = "JOBS_RELIABILITY_ARGS" // JSON of childArgs
)

// Child roles.
const (
	roleHammer = "hammer" // many goroutines on overlapping keys
	roleKilled = "killed" // stops dead (SIGKILL) at a chosen point; see kill_test.go
)

type childArgs struct {
	Goroutines int    `json:"goroutines"`
	Iterations int    `json:"iterations"`
	Keys       int    `json:"keys"`
	Seed       uint64 `json:"seed"`
	Process    int    `json:"process"`
	JobID      string `json:"job_id,omitempty"`
	Point      string `json:"point,omitempty"`
	// History is the run directory of the parent's jobstest.Recorder,
	// which the child joins with a Sink of its own; empty when the parent
	// records nothing.
	History string `json:"history,omitempty"`
}

// childEvent is one line a child writes on stdout.
type childEvent struct {
	Type      string `json:"type"` // submitted, won, lost, error, ready
	Key       string `json:"key,omitempty"`
	JobID     string `json:"job_id,omitempty"`
	AttemptID string `json:"attempt_id,omitempty"`
	Err       string `json:"err,omitempty"`
	// WriteWaits, on the last line of a hammer on SQLite, are the waits
	// for the write lock of every write of the process, in microseconds.
	WriteWaits []int64 `json:"write_waits,omitempty"`
}

func runChild(role string) int {
	var args childArgs
	if err := json.Unmarshal([]byte(os.Getenv(envChildArgs)), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad args:", err)
		return 2
	}
	ctx := context.Background()
	var waits writeWaits
	store, err := openChildStore(ctx, jobs.ObserveWriteWait(waits.add))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 2
	}
	defer store.Close()
	rec, err := jobstest.JoinRecorder(args.History)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	code := runRole(ctx, role, rec.Store(store, role), args, &waits)
	if err := rec.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return code
}

// runRole runs the child's part on store (recorded, if the parent
// records).
func runRole(ctx context.Context, role string, store jobs.Store, args childArgs, waits *writeWaits) int {
	out := &eventWriter{enc: json.NewEncoder(os.Stdout)}
	m, err := jobs.New(store, jobs.Options{Hedging: role == roleHammer})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch role {
	case roleHammer:
		hammer(ctx, m, args, out)
		out.write(childEvent{Type: "waits", WriteWaits: waits.micros()})
	case roleKilled:
		return killedChild(ctx, m, args, out)
	case roleFailover:
		return failoverChild(ctx, store, args)
	default:
		fmt.Fprintln(os.Stderr, "child: unknown role", role)
		return 2
	}
	return 0
}

// openChildStore opens the child's store; sqliteOpts apply to SQLite only.
func openChildStore(ctx context.Context, sqliteOpts ...jobs.SQLiteOption) (jobs.SQLStore, error) {
	dsn := os.Getenv(envChildDSN)
	if os.Getenv(envChildDialect) == "postgres" {
		s, err := jobs.OpenPostgres(ctx, dsn)
		if err == nil {
			s.DB().SetMaxOpenConns(6)
		}
		return s, err
	}
	return jobs.OpenSQLite(ctx, dsn, sqliteOpts...)
}

// writeWaits collects the waits for the write lock that a store reports.
type writeWaits struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *writeWaits) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
}

func (w *writeWaits) micros() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int64, len(w.waits))
	for i, d := range w.waits {
		out[i] = d.Microseconds()
	}
	return out
}

// waitSummary describes waits in microseconds: count, median, p99, max.
func waitSummary(waits []int64) string {
	if len(waits) == 0 {
		return "no writes observed"
	}
	slices.Sort(waits)
	at := func(q float64) time.Duration {
		return time.Duration(waits[int(q*float64(len(waits)-1))]) * time.Microsecond
	}
	return fmt.Sprintf("%d writes, wait p50 %v, p99 %v, p99.9 %v, max %v", len(waits), at(0.5), at(0.99), at(0.999), at(1))
}

type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) write(e childEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.Encode(e)
}

// hammer runs goroutines that submit overlapping keys and race attempts to
// complete them (hedging lets several run at once). Every error that is not
// one of the contract's answers to a race is reported.
func hammer(ctx context.Context, m *jobs.Manager, args childArgs, out *eventWriter) {
	var wg sync.WaitGroup
	for g := range args.Goroutines {
		rng := rand.New(rand.NewPCG(args.Seed, uint64(args.Process*1000+g)))
		wg.Go(func() {
			for range args.Iterations {
				key := fmt.Sprintf("key-%d", rng.IntN(args.Keys))
				report := func(op string, err error) {
					out.write(childEvent{Type: "error", Key: key, Err: op + ": " + err.Error()})
				}
				j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p", Params: json.RawMessage(`{"amount":1}`)})
				if err != nil {
					report("submit", err)
					continue
				}
				out.write(childEvent{Type: "submitted", Key: key, JobID: j.ID})
				a, err := m.StartAttempt(ctx, j.ID, "")
				if errors.Is(err, jobs.ErrAttemptInFlight) || errors.Is(err, jobs.ErrJobClosed) {
					continue
				}
				if err != nil {
					report("start attempt", err)
					continue
				}
				if _, err := m.MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil && !errors.Is(err, jobs.ErrInvalidTransition) {
					report("mark running", err)
				}
				if rng.IntN(10) == 0 {
					if _, err := m.Fail(ctx, a.ID, "provider said no"); err != nil {
						report("fail", err)
					}
					continue
				}
				got, err := m.Complete(ctx, a.ID, resultOf(a.ID))
				switch {
				case err == nil:
					if got.CompletedBy != a.ID {
						report("complete", fmt.Errorf("success but completed by %s", got.CompletedBy))
					}
					out.write(childEvent{Type: "won", JobID: j.ID, AttemptID: a.ID})
				case errors.Is(err, jobs.ErrLostRace):
					out.write(childEvent{Type: "lost", JobID: j.ID, AttemptID: a.ID})
				default:
					report("complete", err)
				}
			}
		})
	}
	wg.Wait()
}

// spawn starts the test binary as a child with role and args.
func spawn(ctx context.Context, t *testing.T, role, dialect, dsn string, args childArgs) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	raw, _ := json.Marshal(args)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildRole+"="+role, envChildDialect+"="+dialect, envChildDSN+"="+dsn, envChildArgs+"="+string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	return cmd, &stdout, &stderr
}

func parseEvents(t *testing.T, b *bytes.Buffer) []childEvent {
	t.Helper()
	var evs []childEvent
	sc := bufio.NewScanner(b)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e childEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Errorf("child wrote %q: %v", sc.Text(), err)
			continue
		}
		evs = append(evs, e)
	}
	return evs
}

// TestManyProcesses runs processes × goroutines of the test binary against
// one PostgreSQL schema and one SQLite file, on overlapping keys with
// racing completions: no duplicate job, no double completion, and no error
// (in particular no SQLITE_BUSY) reaching any caller.
func TestManyProcesses(t *testing.T) {
	t.Parallel()
	const processes, goroutines = 4, 50
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			var dsn string
			var store jobs.SQLStore
			if d.name == "postgres" {
				dsn = testdb.PostgresDSN(t)
				var err error
				if store, err = jobs.OpenPostgres(context.Background(), dsn); err != nil {
					t.Fatal(err)
				}
				store.DB().SetMaxOpenConns(2)
				t.Cleanup(func() { store.Close() })
			} else {
				dsn = t.TempDir() + "/shared.db"
				store = testdb.NewSQLiteAt(t, dsn)
			}
			// Each child records its calls into this run, with a Sink of its own.
			rec := jobstest.NewRecorder(t)
			base := seed(t)
			iters := 6 * soak()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			start := time.Now()
			type child struct {
				cmd            *exec.Cmd
				stdout, stderr *bytes.Buffer
			}
			var children []child
			for p := range processes {
				cmd, so, se := spawn(ctx, t, roleHammer, d.name, dsn, childArgs{Goroutines: goroutines, Iterations: iters, Keys: 150 * soak(), Seed: base, Process: p, History: rec.Dir()})
				children = append(children, child{cmd, so, se})
			}
			stopWatch := watchTransitions(t, store, 250*time.Millisecond)
			jobOfKey := map[string]string{}
			winner := map[string]string{}
			var submitted, won, lost, failures int
			var waits []int64
			for i, c := range children {
				if err := c.cmd.Wait(); err != nil {
					t.Errorf("process %d: %v\n%s", i, err, c.stderr)
				}
				for _, e := range parseEvents(t, c.stdout) {
					switch e.Type {
					case "submitted":
						submitted++
						if prev, ok := jobOfKey[e.Key]; ok && prev != e.JobID {
							t.Errorf("duplicate job for %s: %s and %s", e.Key, prev, e.JobID)
						}
						jobOfKey[e.Key] = e.JobID
					case "won":
						won++
						if prev, ok := winner[e.JobID]; ok && prev != e.AttemptID {
							t.Errorf("double completion of %s: %s and %s", e.JobID, prev, e.AttemptID)
						}
						winner[e.JobID] = e.AttemptID
					case "lost":
						lost++
					case "waits":
						waits = append(waits, e.WriteWaits...)
					case "error":
						failures++
						if failures <= 10 {
							t.Errorf("a caller got an error: %s", e.Err)
						}
					}
				}
			}
			stopWatch()
			t.Logf("%s: %d processes x %d goroutines x %d iterations in %v: %d submits for %d keys, %d wins, %d lost races, %d errors",
				d.name, processes, goroutines, iters, time.Since(start).Round(time.Millisecond), submitted, len(jobOfKey), won, lost, failures)
			if d.name == "sqlite" {
				t.Logf("sqlite: waits for the write lock: %s", waitSummary(waits))
			}
			if submitted != processes*goroutines*iters-failures {
				t.Errorf("%d submits recorded, want %d", submitted, processes*goroutines*iters)
			}
			for key, id := range jobOfKey {
				j, err := store.JobByKey(context.Background(), "tenant", key)
				if err != nil || j.ID != id {
					t.Errorf("key %s: store has %s (%v), callers were told %s", key, j.ID, err, id)
				}
			}
			for jobID, att := range winner {
				j, err := store.Job(context.Background(), jobID)
				if err != nil || j.CompletedBy != att || string(j.Result) != string(resultOf(att)) {
					t.Errorf("job %s: callers were told %s won; store: %q %s (%v)", jobID, att, j.CompletedBy, j.Result, err)
				}
			}
			assertInvariants(t, store)
		})
	}
}
