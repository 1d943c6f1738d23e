package jobs

import (
	"context"
	"io"
	"os"
)

// writeQueue puts the writers of one SQLite database in line, so that a
// write waits its turn instead of polling for SQLite's lock. SQLite's own
// wait for a busy database is not a queue: its busy handler sleeps for
// growing pauses (up to 100 ms each), and a process that has just released
// the lock takes it again while the others sleep, so under contention some
// writers wait for seconds while others write again and again.
//
// The queue has two stages. The store's own goroutines wait for a turn
// first come, first served. The goroutine whose turn it is then takes an
// exclusive OS lock on a file next to the database (lockWait), which
// stores in other processes, and other stores in this one, take before
// they write as well. A waiter there is woken by the kernel when the lock
// is released, rather than after a sleep. Only then does the write begin,
// and SQLite's lock is normally free.
//
// A nil *writeQueue queues nothing: PostgreSQL, and stores over a caller's
// *sql.DB.
type writeQueue struct {
	turn     chan struct{} // one slot: holding it is this store's turn
	lockPath string        // the shared lock file; "" for none (":memory:")
	held     io.Closer     // the lock file while it is locked; closing unlocks it
}

// newWriteQueue returns a queue whose writers take an exclusive lock on the
// file at lockPath, or only queue within the store when lockPath is "".
func newWriteQueue(lockPath string) *writeQueue {
	return &writeQueue{turn: make(chan struct{}, 1), lockPath: lockPath}
}

// create makes sure the lock file exists and can be opened, so that a
// directory that refuses it is reported when the store is opened.
func (q *writeQueue) create() error {
	f, err := os.OpenFile(q.lockPath, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// lock waits until it is the caller's turn to write, or until ctx ends
// (then it returns ctx's error). Every successful lock must be followed by
// one unlock.
func (q *writeQueue) lock(ctx context.Context) error {
	if q == nil {
		return nil
	}
	select {
	case q.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if q.lockPath == "" {
		return nil
	}
	f, err := lockWait(ctx, q.lockPath)
	if err != nil {
		<-q.turn
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &StorageError{Op: "lock for writing", Kind: StorageUnavailable, Message: err.Error()}
	}
	q.held = f
	return nil
}

// unlock ends the caller's turn: the file lock first, then the store's turn.
func (q *writeQueue) unlock() {
	if q == nil {
		return
	}
	if q.held != nil {
		q.held.Close()
		q.held = nil
	}
	<-q.turn
}
