package linearcheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/invariant"
)

// workload races Managers over one store: rounds in which every worker is
// released at once on one key, submitting it (with key reuse, so that a
// failed or cancelled job is replaced while its attempts may still be
// settling), starting attempts and hedges, completing, failing and
// cancelling them, closing the job, and reading; reconcilers claiming and
// resolving the attempts in doubt all along; and, if purge is set, a
// purger deleting what is done.
type workload struct {
	workers     int // released together each round
	rounds      int
	keys        int // keys in use at once; each serves three rounds
	reconcilers int
	purge       bool
	seed        uint64

	// quiet, if set, is called once the load stopped, before the final
	// reads: it turns injected faults off.
	quiet func()
}

// options are the Managers' options: quiet logs.
var options = jobs.Options{Logger: slog.New(slog.DiscardHandler)}

// release runs fn(0), …, fn(n-1) in goroutines released at once, and
// waits for them.
func release(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// lookups is a provider whose answers a reconciler gets at random: done
// (with a result), never received, failed, or still pending.
type lookups struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (p *lookups) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, failover.Definitive(errors.New("not called in these tests"))
}

func (p *lookups) Lookup(_ context.Context, a jobs.Attempt) (failover.Outcome, error) {
	p.mu.Lock()
	n := p.rng.IntN(4)
	p.mu.Unlock()
	switch n {
	case 0:
		return failover.Outcome{State: failover.OutcomeSucceeded, Result: json.RawMessage(`{"looked_up":"` + a.ID + `"}`)}, nil
	case 1:
		return failover.Outcome{State: failover.OutcomeNotFound}, nil
	case 2:
		return failover.Outcome{State: failover.OutcomeFailed, Reason: "declined"}, nil
	}
	return failover.Outcome{State: failover.OutcomePending}, nil
}

// drive runs the workload against the run's store.
func (w workload) drive(t *testing.T, r *run) {
	t.Helper()
	ctx := context.Background()
	managers := make([]*jobs.Manager, w.workers)
	for i := range managers {
		managers[i] = r.manager(fmt.Sprintf("worker-%d", i), options)
	}
	var stop atomic.Bool
	var background sync.WaitGroup
	for k := range w.reconcilers {
		m := r.manager(fmt.Sprintf("reconciler-%d", k), options)
		rec := &failover.Reconciler{Manager: m, Providers: map[string]failover.Provider{"p": &lookups{rng: rand.New(rand.NewPCG(w.seed, uint64(k)))}},
			StaleAfter: time.Nanosecond, RecheckAfter: time.Nanosecond, LookupTimeout: time.Second, BatchSize: 8}
		background.Go(func() {
			for !stop.Load() {
				rec.ReconcileOnce(ctx)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	if w.purge {
		m := r.manager("purger", options)
		background.Go(func() {
			for !stop.Load() {
				m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Now().Add(time.Hour), BatchSize: 2})
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	for n := range w.rounds {
		key := fmt.Sprintf("k%d-g%d", n%w.keys, n/(3*w.keys))
		release(w.workers, func(i int) {
			rng := rand.New(rand.NewPCG(w.seed, uint64(n*1000+i)))
			w.worker(ctx, managers[i], rng, key, (i+n)%6)
		})
	}
	stop.Store(true)
	background.Wait()
	if w.quiet != nil {
		w.quiet()
	}
	// Read everything at the end: the final state must be what the
	// history says.
	auditor := r.store("auditor").(invariant.Store)
	snap, err := invariant.TakeSnapshot(ctx, auditor)
	if err != nil {
		t.Fatalf("final snapshot: %v", err)
	}
	t.Logf("%d jobs at the end", len(snap.Jobs))
}

// worker plays one role on key in one round.
func (w workload) worker(ctx context.Context, m *jobs.Manager, rng *rand.Rand, key string, role int) {
	req := jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p",
		Params: json.RawMessage(`{"amount":1}`), Reuse: jobs.KeyReuseAfterFailureOrCancel}
	j, _, err := m.Submit(ctx, req)
	if err != nil {
		return // the key's old job still has an attempt in doubt, or a fault
	}
	result := json.RawMessage(fmt.Sprintf(`{"by":%d}`, rng.IntN(1000)))
	switch role {
	case 0, 1, 2: // a runner; roles 1 and 2 hedge past a running attempt
		var opts []jobs.AttemptOption
		if role > 0 {
			opts = append(opts, jobs.Hedge())
		}
		a, err := m.StartAttempt(ctx, j.ID, "", opts...)
		for try := 0; role > 0 && try < 3 && errors.Is(err, jobs.ErrAttemptInFlight); try++ {
			// A hedge waits for the attempt in doubt to be acknowledged.
			time.Sleep(time.Duration(1+rng.IntN(1000)) * time.Microsecond)
			a, err = m.StartAttempt(ctx, j.ID, "", opts...)
		}
		if err != nil {
			return
		}
		if rng.IntN(4) != 0 {
			m.MarkRunning(ctx, a.ID, "ref-"+a.ID[len(a.ID)-6:])
		}
		switch rng.IntN(6) {
		case 0:
			m.Fail(ctx, a.ID, "provider said no")
		case 1:
			m.MarkUnknown(ctx, a.ID, "timeout") // left to the reconcilers
		case 2:
			m.MarkUnknown(ctx, a.ID, "timeout")
			m.Complete(ctx, a.ID, result) // the result arrives after all
		default:
			m.Complete(ctx, a.ID, result)
		}
	case 3: // an operator cancels, or gives up, while attempts run
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
		switch rng.IntN(4) {
		case 0, 1:
			m.CancelJob(ctx, j.ID, "operator")
		case 2:
			m.FailJob(ctx, j.ID, "given up")
		default:
			m.Get(ctx, j.ID)
		}
	case 4: // an operator cancels attempts, racing their results; or
		// cancels the job, and the client submits it again at once,
		// racing the outcome of its attempts
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		if rng.IntN(2) == 0 {
			m.CancelJob(ctx, j.ID, "operator")
			m.Submit(ctx, req)
			return
		}
		as, _ := m.Attempts(ctx, j.ID)
		for _, a := range as {
			if a.State.Open() && rng.IntN(2) == 0 {
				m.Cancel(ctx, a.ID, "out of band")
			}
		}
	case 5: // the client again, a little later, and readers
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		if again, _, err := m.Submit(ctx, req); err == nil {
			j = again
		}
		m.Get(ctx, j.ID)
		m.GetByKey(ctx, "tenant", key)
		m.Attempts(ctx, j.ID)
		m.Replaced(ctx, j.ID)
	}
}
