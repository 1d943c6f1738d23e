package mysql

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
)

// MySQL has no LISTEN/NOTIFY. The store implements jobs.CloseNotifier, so
// that Manager.Wait need not poll each job on its own, with two sources
// of wake-ups:
//   - a job closed through this store (Complete, FailJob, CancelJob) wakes
//     its waiters in this process at once;
//   - a job closed through another process or another Galera node is
//     found by one poller per store, which reads all the jobs waited for
//     in one query every PollInterval (100ms by default), and only while
//     someone waits.
//
// The Manager still reads the job now and then (up to every 5s) in case a
// wake-up is missed.

// errStoreClosed refuses a waiter of a closed store.
var errStoreClosed = jobs.NewStorageError(jobs.StorageUnavailable, "notify", "", errors.New("the store is closed"))

// maxPollBatch bounds the IDs of one polling query.
const maxPollBatch = 500

// poller tracks the waiters of one store.
type poller struct {
	s        *Store
	interval time.Duration

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	running bool          // the polling goroutine runs
	stop    chan struct{} // closed by close
	closed  bool
	done    sync.WaitGroup
}

func newPoller(s *Store, interval time.Duration) *poller {
	return &poller{s: s, interval: interval, waiters: map[string]map[chan struct{}]struct{}{}, stop: make(chan struct{})}
}

// NotifyClosed implements jobs.CloseNotifier by polling (see above). It
// registers the waiter before it returns, so that a job closed after the
// call returns is found by the next poll at the latest.
func (s *Store) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, interpret("notify", err)
	}
	return s.notify.add(jobID)
}

func (p *poller) add(jobID string) (<-chan struct{}, func(), error) {
	wake := make(chan struct{}, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, errStoreClosed
	}
	if p.waiters[jobID] == nil {
		p.waiters[jobID] = map[chan struct{}]struct{}{}
	}
	p.waiters[jobID][wake] = struct{}{}
	if !p.running {
		p.running = true
		p.done.Add(1)
		go p.run()
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			delete(p.waiters[jobID], wake)
			if len(p.waiters[jobID]) == 0 {
				delete(p.waiters, jobID)
			}
		})
	}
	return wake, stop, nil
}

// wake tells the waiters of the job that it may have closed. A waiter
// that has not taken an earlier value has nothing more to learn.
func (p *poller) wake(jobID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for w := range p.waiters[jobID] {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// run polls while anyone waits, and ends when nobody does.
func (p *poller) run() {
	defer p.done.Done()
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		if len(p.waiters) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		ids := make([]any, 0, len(p.waiters))
		for id := range p.waiters {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		p.poll(ids)
	}
}

// poll reads which of the jobs ids are terminal and wakes their waiters.
// A failed read wakes nobody: the Manager's own reads go on.
func (p *poller) poll(ids []any) {
	ctx, cancel := context.WithTimeout(context.Background(), max(p.interval*10, time.Second))
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for len(ids) > 0 {
		batch := ids[:min(len(ids), maxPollBatch)]
		ids = ids[len(batch):]
		closed, err := queryAll(ctx, p.s.db, "notify", func(sc scanner) (string, error) {
			var id string
			return id, sc.Scan(&id)
		}, qClosedAmong+placeholders(len(batch))+`)`, batch...)
		if err != nil {
			return
		}
		for _, id := range closed {
			p.wake(id)
		}
	}
}

func (p *poller) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.stop)
	}
	p.mu.Unlock()
	p.done.Wait()
}
