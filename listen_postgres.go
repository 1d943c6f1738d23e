package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// closedChannel is the channel on which migration 0002's trigger announces
// a job that became terminal; the payload is the job's ID.
const closedChannel = "jobs_closed"

// listenReadyTimeout bounds how long a waiter waits for the listening
// connection before it falls back to polling.
const listenReadyTimeout = 5 * time.Second

// NotifyClosed implements CloseNotifier on PostgreSQL. All waiters of a
// store share one connection, opened with the settings of the store's pool
// but outside it, which LISTENs while at least one waiter is registered and
// is closed when the last one leaves. If it cannot listen within five
// seconds, NotifyClosed returns an error and the waiter polls. On SQLite it
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
	up     atomic.Bool   // LISTEN is in effect now
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
	t := time.NewTimer(listenReadyTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	case <-t.C:
		stop()
		return nil, nil, &StorageError{Op: "listen", Kind: StorageUnavailable, Message: "not listening yet"}
	case <-sess.ready:
	}
	if sess.err != nil && !sess.up.Load() {
		// The first try failed and no later one has succeeded yet.
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
			sess.up.Store(true)
			if !first {
				l.wakeAll()
			}
			ready(nil)
		}, l.dispatch)
		sess.up.Store(false)
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

// listen opens a connection of its own, with the settings of the
// connections of db, LISTENs on it, calls listening, then passes every
// notification's payload to notify until ctx ends or the connection fails.
// The connection is outside db's pool, so that waiters never take a slot
// that queries need; it is closed when listen returns.
func listen(ctx context.Context, db *sql.DB, listening func(), notify func(jobID string)) error {
	cfg, err := connConfig(ctx, db)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+closedChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == closedChannel {
			notify(n.Payload)
		}
	}
}

// connConfig returns the settings of db's connections (host, credentials,
// search_path, TLS), read from one of them.
func connConfig(ctx context.Context, db *sql.DB) (*pgx.ConnConfig, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var cfg *pgx.ConnConfig
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("jobs: listen needs the pgx driver, have %T", dc)
		}
		cfg = sc.Conn().Config() // a copy
		// The copy still delivers notifications to the pooled connection;
		// the new connection must buffer its own.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}
