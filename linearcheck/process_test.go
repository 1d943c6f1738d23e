package linearcheck_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/linearcheck"
)

// Histories recorded by several processes into one directory: processes
// that hammer one database at once, and a process killed (SIGKILL) in the
// middle of a call, whose history holds the call and no return.

// The environment of a child process: its role, its store, the run's
// directory, and an argument.
const (
	envChild = "LINEARCHECK_CHILD"
	envStore = "LINEARCHECK_STORE" // sqlite:<path> or postgres:<dsn>
	envDir   = "LINEARCHECK_DIR"
	envArg   = "LINEARCHECK_ARG"
)

// child runs the part of a child process and returns its exit code; 0 and
// false if this process is no child.
func child() (int, bool) {
	role := os.Getenv(envChild)
	if role == "" {
		return 0, false
	}
	if err := runChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1, true
	}
	return 0, true
}

func openStore(ctx context.Context, spec string) (jobs.SQLStore, error) {
	dialect, dsn, _ := strings.Cut(spec, ":")
	if dialect == "postgres" {
		s, err := jobs.OpenPostgres(ctx, dsn)
		if err == nil {
			s.DB().SetMaxOpenConns(4)
		}
		return s, err
	}
	return jobs.OpenSQLite(ctx, dsn)
}

func runChild(role string) error {
	ctx := context.Background()
	store, err := openStore(ctx, os.Getenv(envStore))
	if err != nil {
		return err
	}
	defer store.Close()
	sink, err := history.NewSink(os.Getenv(envDir))
	if err != nil {
		return err
	}
	defer sink.Close()
	switch role {
	case "killed":
		return killedChild(ctx, store, sink, os.Getenv(envArg))
	case "hammer":
		seed, _ := strconv.ParseUint(os.Getenv(envArg), 10, 64)
		w := workload{seed: seed}
		var wg sync.WaitGroup
		for g := range 4 {
			m, err := jobs.New(history.Record(store, sink, fmt.Sprintf("worker-%d", g)), options)
			if err != nil {
				return err
			}
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				for n := range 24 {
					w.worker(ctx, m, rng, fmt.Sprintf("k%d-g%d", n%3, n/8), rng.IntN(6))
				}
			})
		}
		wg.Wait()
		return sink.Close()
	}
	return fmt.Errorf("no role %q", role)
}

// stuck blocks CompleteAttempt until the process is killed: before the
// store is called, or after it answered.
type stuck struct {
	jobs.SQLStore
	after bool
}

func (s stuck) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	if s.after {
		s.SQLStore.CompleteAttempt(ctx, c)
	}
	fmt.Println("stuck")
	select {}
}

// killedChild submits a job, runs an attempt, and completes it through a
// store that never answers.
func killedChild(ctx context.Context, store jobs.SQLStore, sink *history.Sink, when string) error {
	m, err := jobs.New(history.Record(stuck{store, when == "after"}, sink, "doomed"), options)
	if err != nil {
		return err
	}
	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "tenant", Key: "killed", Kind: "charge", Provider: "p", Params: json.RawMessage(`{}`)})
	if err != nil {
		return err
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		return err
	}
	if _, err := m.MarkRunning(ctx, a.ID, "ref"); err != nil {
		return err
	}
	m.Complete(ctx, a.ID, json.RawMessage(`{"paid":true}`))
	return nil
}

// startChild starts the test binary as a child with role and arg.
func startChild(t *testing.T, role, store, dir, arg string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+role, envStore+"="+store, envDir+"="+dir, envArg+"="+arg)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// TestKilledClient kills a process while its Complete is in the store,
// before the store ran it or after; another process then finds the job
// and resolves it. The call without a return is ambiguous: the history is
// linearizable either way. Without that call, the history of the process
// killed after the write is not: a result that no call offered.
func TestKilledClient(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "history")
			dbPath := filepath.Join(t.TempDir(), "jobs.db")
			cmd, out := startChild(t, "killed", "sqlite:"+dbPath, dir, when)
			for out.Scan() && out.Text() != "stuck" {
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			r := joinRun(t, testdb.NewSQLiteAt(t, dbPath), dir)
			m := r.manager("survivor", options)
			j, err := m.GetByKey(ctx, "tenant", "killed")
			if err != nil {
				t.Fatal(err)
			}
			as, err := m.Attempts(ctx, j.ID)
			if err != nil || len(as) != 1 {
				t.Fatalf("attempts %v, %v", as, err)
			}
			if j.State == jobs.JobRunning {
				// The result never reached the store: the survivor learns it.
				if _, err := m.MarkUnknown(ctx, as[0].ID, "its process died"); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Complete(ctx, as[0].ID, json.RawMessage(`{"paid":true}`)); err != nil {
					t.Fatal(err)
				}
			}
			m.Get(ctx, j.ID)
			if want := map[string]jobs.JobState{"before": jobs.JobRunning, "after": jobs.JobSucceeded}[when]; j.State != want {
				t.Fatalf("the survivor found the job %s; want %s", j.State, want)
			}

			h := r.load()
			if len(h.Processes) != 2 {
				t.Errorf("%d processes recorded; want 2", len(h.Processes))
			}
			res := linearcheck.Check(h)
			t.Log(res.Summary())
			if !res.Ok() || res.Unreturned != 1 {
				t.Fatalf("%d calls without return; want 1\n%s", res.Unreturned, res.Report())
			}
			// Leave the call that died out.
			var kept []history.Op
			for _, op := range h.Ops {
				if op.Returned {
					kept = append(kept, op)
				}
			}
			h.Ops = kept
			without := linearcheck.Check(h)
			if when == "after" && without.Ok() {
				t.Error("without the call that died, a result from nowhere was accepted")
			}
			if when == "before" && !without.Ok() {
				t.Errorf("without the call that died before writing:\n%s", without.Report())
			}
		})
	}
}

// TestProcesses records three processes hammering one database at once,
// each with four workers, into one directory.
func TestProcesses(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var spec string
			if dialect == "postgres" {
				spec = "postgres:" + testdb.PostgresDSN(t)
			} else {
				spec = "sqlite:" + filepath.Join(t.TempDir(), "jobs.db")
			}
			store, err := openStore(ctx, spec) // applies the schema once, before the children
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			dir := filepath.Join(t.TempDir(), "history")
			var cmds []*exec.Cmd
			for p := range 3 {
				cmd, _ := startChild(t, "hammer", spec, dir, strconv.Itoa(p+1))
				cmds = append(cmds, cmd)
			}
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
			}
			r := joinRun(t, store, dir)
			if _, err := invariant.TakeSnapshot(ctx, r.store("auditor").(invariant.Store)); err != nil {
				t.Fatal(err)
			}
			res := r.mustBeLinearizable()
			if res.Partitions < 3 || res.Ops < 300 {
				t.Errorf("%d operations in %d partitions: the processes did little", res.Ops, res.Partitions)
			}
		})
	}
}
