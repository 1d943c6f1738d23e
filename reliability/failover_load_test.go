package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// roleFailover is the child of TestFailoverKeepsThePromise: goroutines that
// submit, attempt, complete and wait through failovers, retrying on
// ErrStorage as a user would.
const roleFailover = "failover"

// failoverRetryFor is how long a caller keeps retrying one operation on
// ErrStorage before it gives up (and the test fails).
const failoverRetryFor = 2 * time.Minute

// failoverEvent is one line a failover child writes on stdout.
type failoverEvent struct {
	Type      string `json:"type"` // submitted, won, lost, waited, storage-error, unexpected
	Op        string `json:"op,omitempty"`
	Key       string `json:"key,omitempty"`
	JobID     string `json:"job,omitempty"`
	AttemptID string `json:"attempt,omitempty"` // won, lost; waited: the job's winner
	Retries   int    `json:"retries,omitempty"` // storage errors retried before this answer
	Class     string `json:"class,omitempty"`   // of an error; see errorClass
	Err       string `json:"err,omitempty"`
	At        int64  `json:"at,omitempty"`       // when the caller got the answer, in Unix nanoseconds
	AckedAt   int64  `json:"acked_at,omitempty"` // unexpected: when the job or attempt concerned was acknowledged
}

// errorClass names what a caller can tell of err with the package's API:
// its sentinel, and for storage errors their Kind and database code.
func errorClass(err error) string {
	var se *jobs.StorageError
	if errors.As(err, &se) {
		c := "ErrStorage/" + string(se.Kind)
		if se.Kind == "" {
			c = "ErrStorage/NO KIND"
		}
		if se.Code != "" {
			c += "/" + se.Code
		}
		return c
	}
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrNotFound", jobs.ErrNotFound}, {"ErrKeyConflict", jobs.ErrKeyConflict},
		{"ErrAttemptInFlight", jobs.ErrAttemptInFlight}, {"ErrLostRace", jobs.ErrLostRace},
		{"ErrInvalidTransition", jobs.ErrInvalidTransition}, {"ErrJobClosed", jobs.ErrJobClosed},
		{"ErrInvalidInput", jobs.ErrInvalidInput}, {"ErrStorage", jobs.ErrStorage},
		{"context.DeadlineExceeded", context.DeadlineExceeded}, {"context.Canceled", context.Canceled},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return fmt.Sprintf("UNTYPED %T", err)
}

// failoverChild runs args.Goroutines callers until its stdin is closed. A
// line "slow" on stdin makes each caller pause 100 ms between steps, a
// line "full" ends the pauses (failoverLoad.throttle).
func failoverChild(ctx context.Context, store jobs.Store, args childArgs) int {
	m, err := jobs.New(store, jobs.Options{Hedging: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e failoverEvent) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(e)
	}
	stop := make(chan struct{})
	var slow atomic.Bool
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			slow.Store(sc.Text() == "slow")
		}
		close(stop)
	}()
	var wg sync.WaitGroup
	for g := range args.Goroutines {
		c := &failoverCaller{m: m, rng: rand.New(rand.NewPCG(args.Seed, uint64(args.Process*1000+g))), keys: args.Keys, emit: emit}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if slow.Load() {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
				c.step(ctx)
			}
		})
	}
	wg.Wait()
	return 0
}

// failoverCaller is one goroutine of a failover child.
type failoverCaller struct {
	m    *jobs.Manager
	rng  *rand.Rand
	keys int
	emit func(failoverEvent)
}

// retry calls fn until it returns anything but a storage error, reporting
// every storage error, for up to failoverRetryFor. Each call gets ten
// seconds.
func (c *failoverCaller) retry(ctx context.Context, op string, fn func(context.Context) error) (retries int, err error) {
	deadline := time.Now().Add(failoverRetryFor)
	pause := 10 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = fn(cctx)
		cancel()
		if !errors.Is(err, jobs.ErrStorage) || time.Now().After(deadline) {
			return retries, err
		}
		c.emit(failoverEvent{Type: "storage-error", Op: op, Class: errorClass(err), Err: err.Error(), At: time.Now().UnixNano()})
		retries++
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// unexpected reports an answer the contract does not allow here, to a
// call about a job or attempt acknowledged at acked (zero if none).
func (c *failoverCaller) unexpected(op string, err error, acked time.Time) {
	e := failoverEvent{Type: "unexpected", Op: op, Class: errorClass(err), Err: err.Error(), At: time.Now().UnixNano()}
	if !acked.IsZero() {
		e.AckedAt = acked.UnixNano()
	}
	c.emit(e)
}

// step is one user intent: submit it (on a key other callers use in the
// same second), try it, and complete it, racing hedged attempts; or wait
// for the attempt in flight.
func (c *failoverCaller) step(ctx context.Context) {
	key := fmt.Sprintf("k%d-%d", time.Now().Unix(), c.rng.IntN(c.keys))
	var j jobs.Job
	n, err := c.retry(ctx, "submit", func(ctx context.Context) (err error) {
		j, _, err = c.m.Submit(ctx, jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p", Params: json.RawMessage(`{"amount":1}`)})
		return err
	})
	if err != nil {
		c.unexpected("submit", err, time.Time{})
		return
	}
	jobAcked := time.Now()
	c.emit(failoverEvent{Type: "submitted", Key: key, JobID: j.ID, Retries: n, At: jobAcked.UnixNano()})
	if j.State.Terminal() {
		return
	}
	var a jobs.Attempt
	_, err = c.retry(ctx, "start attempt", func(ctx context.Context) (err error) {
		a, err = c.m.StartAttempt(ctx, j.ID, "")
		return err
	})
	switch {
	case errors.Is(err, jobs.ErrAttemptInFlight):
		if c.rng.IntN(4) == 0 {
			c.wait(ctx, j.ID, jobAcked)
		}
		return
	case errors.Is(err, jobs.ErrJobClosed):
		return
	case err != nil:
		c.unexpected("start attempt", err, jobAcked)
		return
	}
	attemptAcked := time.Now()
	if _, err := c.retry(ctx, "mark running", func(ctx context.Context) error {
		_, err := c.m.MarkRunning(ctx, a.ID, "ref-"+a.ID)
		return err
	}); err != nil {
		c.unexpected("mark running", err, attemptAcked)
		return
	}
	if c.rng.IntN(10) == 0 {
		if _, err := c.retry(ctx, "fail", func(ctx context.Context) error {
			_, err := c.m.Fail(ctx, a.ID, "provider said no")
			return err
		}); err != nil {
			c.unexpected("fail", err, attemptAcked)
		}
		return
	}
	var got jobs.Job
	n, err = c.retry(ctx, "complete", func(ctx context.Context) (err error) {
		got, err = c.m.Complete(ctx, a.ID, resultOf(a.ID))
		return err
	})
	now := time.Now().UnixNano()
	switch {
	case err == nil && got.CompletedBy == a.ID:
		c.emit(failoverEvent{Type: "won", JobID: j.ID, AttemptID: a.ID, Retries: n, At: now})
	case err == nil:
		c.unexpected("complete", fmt.Errorf("success, but the job returned was completed by %s", got.CompletedBy), attemptAcked)
	case errors.Is(err, jobs.ErrLostRace):
		c.emit(failoverEvent{Type: "lost", JobID: j.ID, AttemptID: a.ID, Retries: n, At: now})
	default:
		c.unexpected("complete", err, attemptAcked)
	}
}

// wait waits up to five seconds for a job, acknowledged at acked, that
// another caller is trying; a terminal answer is reported with the winner
// it names.
func (c *failoverCaller) wait(ctx context.Context, jobID string, acked time.Time) {
	var got jobs.Job
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.retry(wctx, "wait", func(ctx context.Context) (err error) {
		got, err = c.m.Wait(ctx, jobID)
		return err
	})
	switch {
	case err == nil:
		c.emit(failoverEvent{Type: "waited", JobID: jobID, AttemptID: got.CompletedBy, Class: string(got.State), At: time.Now().UnixNano()})
	case errors.Is(err, context.DeadlineExceeded) && wctx.Err() != nil:
		// Still in flight (or its attempt failed and nobody tried again).
	default:
		c.unexpected("wait", err, acked)
	}
}

// failoverLoad is the children of one run and what they said.
type failoverLoad struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
	stdout []*bytes.Buffer
	stderr []*bytes.Buffer
}

func startFailoverLoad(t *testing.T, dsn string, processes int, args childArgs) *failoverLoad {
	t.Helper()
	l := &failoverLoad{}
	for p := range processes {
		args.Process = p
		raw, _ := json.Marshal(args)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChildRole+"="+roleFailover, envChildDialect+"=postgres", envChildDSN+"="+dsn, envChildArgs+"="+string(raw))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start child: %v", err)
		}
		l.cmds, l.stdins = append(l.cmds, cmd), append(l.stdins, stdin)
		l.stdout, l.stderr = append(l.stdout, &stdout), append(l.stderr, &stderr)
	}
	t.Cleanup(func() {
		for _, cmd := range l.cmds {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	})
	return l
}

// throttle tells the children to pause between steps (slow) or to run
// at full speed again.
func (l *failoverLoad) throttle(t *testing.T, slow bool) {
	t.Helper()
	line := "full\n"
	if slow {
		line = "slow\n"
	}
	for i, in := range l.stdins {
		if _, err := io.WriteString(in, line); err != nil {
			t.Errorf("process %d: throttle: %v", i, err)
		}
	}
}

// stop tells the children to finish their current step and waits for
// them; it returns what they reported.
func (l *failoverLoad) stop(t *testing.T) []failoverEvent {
	t.Helper()
	for _, in := range l.stdins {
		in.Close()
	}
	var evs []failoverEvent
	for i, cmd := range l.cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, l.stderr[i])
		}
		sc := bufio.NewScanner(l.stdout[i])
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e failoverEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("process %d wrote %q: %v", i, sc.Text(), err)
				continue
			}
			evs = append(evs, e)
		}
	}
	return evs
}
