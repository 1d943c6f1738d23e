package app

import (
	"context"
	"sync"
)

// workQueue holds the IDs of jobs waiting for a worker, a bounded number of
// them, and remembers which jobs it holds from the moment they are queued
// until their worker is done, so that a sweep never queues a job twice.
type workQueue struct {
	ids  chan string
	mu   sync.Mutex
	held map[string]struct{} // queued or being worked on
}

func newWorkQueue(size int) *workQueue {
	return &workQueue{ids: make(chan string, size), held: make(map[string]struct{})}
}

// offer queues the job if there is room, without waiting, and reports
// whether the queue holds it now.
func (q *workQueue) offer(id string) bool {
	if !q.hold(id) {
		return true
	}
	select {
	case q.ids <- id:
		return true
	default:
		q.done(id)
		return false
	}
}

// put queues the job, waiting for room until ctx ends. A job the queue
// already holds is not queued again.
func (q *workQueue) put(ctx context.Context, id string) error {
	if !q.hold(id) {
		return nil
	}
	select {
	case q.ids <- id:
		return nil
	case <-ctx.Done():
		q.done(id)
		return ctx.Err()
	}
}

// take returns the next job to work on, or false once ctx has ended. The
// queue holds the job until done is called for it.
func (q *workQueue) take(ctx context.Context) (string, bool) {
	select {
	case id := <-q.ids:
		return id, true
	case <-ctx.Done():
		return "", false
	}
}

// done releases a job taken from the queue (or one that could not be
// queued): a later sweep may queue it again if it is still pending.
func (q *workQueue) done(id string) {
	q.mu.Lock()
	delete(q.held, id)
	q.mu.Unlock()
}

// hold marks the job as held and reports whether it was not held before.
func (q *workQueue) hold(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.held[id]; ok {
		return false
	}
	q.held[id] = struct{}{}
	return true
}
