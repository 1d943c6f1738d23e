package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// closedChannel is the channel on which migration 0002's trigger announces
// a job that became terminal; the payload is the job's ID.
const closedChannel = "jobs_closed"

// NotifyClosed implements CloseNotifier on PostgreSQL. All waiters of a
// store share one connection from its pool, which LISTENs while at least one
// waiter is registered and goes back (closed, so that no other query ever
// runs on a listening session) when the last one leaves. On SQLite it
// returns an error matching errors.ErrUnsupported.
func (s *SQLStore) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	if s.d != postgresDialect {
		return nil, nil, errUnsupported("NotifyClosed")
	}
	return s.listener.subscribe(ctx, s.db, jobID)
}

// closeListener fans the notifications of one listening connection out to
// the waiters registered for each job.
type closeListener struct {
	mu      sync.Mutex
	waiters map[string]map[*closeWaiter]struct{} // by job ID
	count   int
	session *listenSession // nil when nobody listens
}

type closeWaiter struct{ wake chan struct{} }

// listenSession is one run of the listening goroutine, from the first
// waiter to the last.
type listenSession struct {
	cancel context.CancelFunc
	ready  chan struct{} // closed when LISTEN is in effect, or the first try failed
	err    error         // the first try's error, set before ready is closed
	done   chan struct{} // closed when the goroutine has returned
}

func (w *closeWaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

func (l *closeListener) subscribe(ctx context.Context, db *sql.DB, jobID string) (<-chan struct{}, func(), error) {
	w := &closeWaiter{wake: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.waiters == nil {
		l.waiters = map[string]map[*closeWaiter]struct{}{}
	}
	if l.waiters[jobID] == nil {
		l.waiters[jobID] = map[*closeWaiter]struct{}{}
	}
	l.waiters[jobID][w] = struct{}{}
	l.count++
	if l.session == nil {
		sctx, cancel := context.WithCancel(context.Background())
		l.session = &listenSession{cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
		go l.run(sctx, db, l.session)
	}
	sess := l.session
	l.mu.Unlock()

	var once sync.Once
	stop := func() { once.Do(func() { l.unsubscribe(jobID, w) }) }
	select {
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	case <-sess.ready:
	}
	if sess.err != nil {
		stop()
		return nil, nil, sess.err
	}
	return w.wake, stop, nil
}

func (l *closeListener) unsubscribe(jobID string, w *closeWaiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[jobID], w)
	if len(l.waiters[jobID]) == 0 {
		delete(l.waiters, jobID)
	}
	l.count--
	if l.count == 0 && l.session != nil {
		l.session.cancel()
		l.session = nil
	}
}

// close stops the listening goroutine, if any, and waits for it to return.
// Registered waiters stop being notified and fall back to polling.
func (l *closeListener) close() {
	l.mu.Lock()
	sess := l.session
	l.session = nil
	l.mu.Unlock()
	if sess != nil {
		sess.cancel()
		<-sess.done
	}
}

func (l *closeListener) dispatch(jobID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.waiters[jobID] {
		w.signal()
	}
}

// wakeAll wakes every waiter: notifications may have been lost while the
// connection was down.
func (l *closeListener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ws := range l.waiters {
		for w := range ws {
			w.signal()
		}
	}
}

// run listens until ctx ends, reconnecting with a backoff when the
// connection fails. The first failure is reported to the waiters through
// sess.err (they poll instead); later ones only delay notifications, and
// the waiters are woken after every reconnect.
func (l *closeListener) run(ctx context.Context, db *sql.DB, sess *listenSession) {
	defer close(sess.done)
	first := true
	ready := func(err error) {
		if first {
			first = false
			sess.err = err
			close(sess.ready)
		}
	}
	pause := 100 * time.Millisecond
	for {
		connected := false
		err := listen(ctx, db, func() {
			connected = true
			if !first {
				l.wakeAll()
			}
			ready(nil)
		}, l.dispatch)
		if ctx.Err() != nil {
			ready(ctx.Err())
			return
		}
		ready(&StorageError{Op: "listen", Kind: StorageUnavailable, Message: err.Error()})
		if connected {
			pause = 100 * time.Millisecond
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// listen takes a connection from db, LISTENs on it, calls listening, then
// passes every notification's payload to notify until ctx ends or the
// connection fails. The connection is discarded afterwards rather than
// returned to the pool, since it is still subscribed.
func listen(ctx context.Context, db *sql.DB, listening func(), notify func(jobID string)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var loopErr error
	conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			loopErr = fmt.Errorf("jobs: listen needs the pgx driver, have %T", dc)
			return driver.ErrBadConn
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+closedChannel); err != nil {
			loopErr = err
			return driver.ErrBadConn
		}
		listening()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				loopErr = err
				return driver.ErrBadConn
			}
			if n.Channel == closedChannel {
				notify(n.Payload)
			}
		}
	})
	if loopErr == nil {
		loopErr = errors.New("jobs: listen: connection lost")
	}
	return loopErr
}
