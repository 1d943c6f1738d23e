package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// Points at which a killed child dies.
const (
	beforeProviderCall = "before-provider-call" // after StartAttempt
	beforeComplete     = "before-complete"      // after the provider answered (MarkRunning)
)

// killedChild starts an attempt on args.JobID, goes as far as args.Point,
// says so on stdout, and waits to be killed.
func killedChild(ctx context.Context, m *jobs.Manager, args childArgs, out *eventWriter) int {
	a, err := m.StartAttempt(ctx, args.JobID, "")
	if err != nil {
		out.write(childEvent{Type: "error", Err: err.Error()})
		return 1
	}
	if args.Point == beforeComplete {
		// The provider was called and acknowledged with its reference; its
		// result is in this process's memory only.
		if _, err := m.MarkRunning(ctx, a.ID, "provider-ref-42"); err != nil {
			out.write(childEvent{Type: "error", Err: err.Error()})
			return 1
		}
	}
	out.write(childEvent{Type: "ready", JobID: args.JobID, AttemptID: a.ID})
	select {} // SIGKILL ends it here
}

// TestKilledProcess kills a process with SIGKILL between StartAttempt and
// the provider call, and between the provider call and Complete. The
// attempt stays open (never failed), blocks new attempts and giving up,
// becomes unknown through MarkUnknown, and is resolved by a reconciler.
func TestKilledProcess(t *testing.T) {
	t.Parallel()
	for _, d := range dialects() {
		for _, point := range []string{beforeProviderCall, beforeComplete} {
			t.Run(d.name+"/"+point, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				var dsn string
				var store jobs.SQLStore
				if d.name == "postgres" {
					dsn = testdb.PostgresDSN(t)
					var err error
					if store, err = jobs.OpenPostgres(ctx, dsn); err != nil {
						t.Fatal(err)
					}
					store.DB().SetMaxOpenConns(2)
					t.Cleanup(func() { store.Close() })
				} else {
					dsn = t.TempDir() + "/killed.db"
					store = testdb.NewSQLiteAt(t, dsn)
				}
				// The child records its calls into this run, until it is killed.
				rec := jobstest.NewRecorder(t)
				m, err := jobs.New(rec.Store(store, "survivor"), jobs.Options{})
				if err != nil {
					t.Fatal(err)
				}
				j, _, err := m.Submit(ctx, submitReq("killed"))
				if err != nil {
					t.Fatal(err)
				}

				raw, _ := json.Marshal(childArgs{JobID: j.ID, Point: point, History: rec.Dir()})
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envChildRole+"="+roleKilled, envChildDialect+"="+d.name, envChildDSN+"="+dsn, envChildArgs+"="+string(raw))
				cmd.Stderr = os.Stderr
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				line := make(chan []byte, 1)
				go func() {
					sc := bufio.NewScanner(stdout)
					if sc.Scan() {
						line <- append([]byte(nil), sc.Bytes()...)
					}
					close(line)
				}()
				var ev childEvent
				select {
				case b, ok := <-line:
					if !ok || json.Unmarshal(b, &ev) != nil || ev.Type != "ready" {
						cmd.Process.Kill()
						cmd.Wait()
						t.Fatalf("child did not get ready: %q", b)
					}
				case <-time.After(time.Minute):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatal("child timed out")
				}
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				err = cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child ended with %v, want killed", err)
				}
				<-line

				a, err := m.Attempt(ctx, ev.AttemptID)
				if err != nil {
					t.Fatal(err)
				}
				want := jobs.AttemptStarting
				if point == beforeComplete {
					want = jobs.AttemptRunning
				}
				if a.State != want {
					t.Fatalf("after the kill the attempt is %s, want %s (open, never failed)", a.State, want)
				}
				if _, err := m.StartAttempt(ctx, j.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
					t.Fatalf("new attempt past the dead one: %v, want ErrAttemptInFlight", err)
				}
				if _, err := m.FailJob(ctx, j.ID, "give up"); !errors.Is(err, jobs.ErrAttemptInFlight) {
					t.Fatalf("giving up past the dead one: %v, want ErrAttemptInFlight", err)
				}
				// The reconciler's sweep: the process is gone, so the
				// attempt's outcome is in doubt.
				if a, err = m.MarkUnknown(ctx, a.ID, "worker died"); err != nil || a.State != jobs.AttemptUnknown {
					t.Fatalf("mark unknown: %v (%s)", err, a.State)
				}
				if _, err := m.StartAttempt(ctx, j.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
					t.Fatalf("new attempt past the unknown one: %v, want ErrAttemptInFlight", err)
				}
				if point == beforeProviderCall {
					// The provider has no record of the request: cancel it and
					// try again.
					if _, err := m.Cancel(ctx, a.ID, "provider has no such request"); err != nil {
						t.Fatal(err)
					}
					b, err := m.StartAttempt(ctx, j.ID, "")
					if err != nil {
						t.Fatalf("retry after resolving: %v", err)
					}
					a = b
				}
				// The provider (asked with the recorded reference, or the
				// retry) has the result.
				done, err := m.Complete(ctx, a.ID, json.RawMessage(`{"charged":5}`))
				if err != nil || done.CompletedBy != a.ID {
					t.Fatalf("resolve: %v, job completed by %q", err, done.CompletedBy)
				}
				as, _ := m.Attempts(ctx, j.ID)
				for _, x := range as {
					if x.State == jobs.AttemptFailed {
						t.Errorf("attempt %s ended failed; a dead worker's attempt is never a failure", x.ID)
					}
				}
				assertInvariants(t, store)
			})
		}
	}
}
