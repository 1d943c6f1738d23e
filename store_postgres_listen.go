package jobs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Manager.Wait on PostgreSQL: LISTEN/NOTIFY, on a connection of its own.

// NotifyClosed implements CloseNotifier. All waiters of a store share one
// connection, opened with the settings of the store's pool (or those of
// ListenDSN) but outside it, which LISTENs, on the channel of the schema
// of the store's tables, while at least one waiter is registered and is
// closed when the last one leaves. Once it listens, each
// waiter marks its job as watched: the schema's trigger notifies only for a
// job so marked. If it cannot listen within five seconds, NotifyClosed
// returns an error and the waiter polls.
// Behind a proxy that does not keep one server connection for it
// (PgBouncer in transaction pooling mode), the connection would LISTEN but
// never hear a notification: NotifyClosed finds out with a probe
// notification, returns an error saying so, and for ten minutes answers
// every waiter with it at once.
func (s *PostgresStore) NotifyClosed(ctx context.Context, jobID string) (<-chan struct{}, func(), error) {
	return s.listener.subscribe(ctx, s.db, jobID)
}

// The schema's trigger announces a job that became terminal on a channel
// of the schema's own (pgClosedChannel), with the job's ID as the payload.

// Timing of the listening connection.
const (
	// listenReadyTimeout bounds how long a waiter waits for the listening
	// connection before it falls back to polling.
	listenReadyTimeout = 5 * time.Second
	// listenRetryMax is the longest pause between two tries to connect
	// again, so that waiters hear of the jobs that close on a new primary
	// within a second of its promotion.
	listenRetryMax = time.Second
	// listenProbeTimeout bounds the wait for the probe notification that
	// proves a connection through a proxy can hear others.
	listenProbeTimeout = 2 * time.Second
	// listenDeafRecheck is how long waiters poll, after a listening
	// connection was found unable to hear notifications, before the store
	// tries again.
	listenDeafRecheck = 10 * time.Minute
)

// deafError reports a listening connection that notifications do not
// reach. Manager.Wait warns about it once.
type deafError struct {
	direct bool // the connection was opened with ListenDSN
}

func (e *deafError) Error() string {
	if e.direct {
		return "jobs: listen: notifications do not reach the connection opened with ListenDSN: " +
			"it goes through a proxy that does not keep one server connection for it (PgBouncer in transaction pooling mode?); " +
			"point ListenDSN at the database itself"
	}
	return "jobs: listen: notifications do not reach the store's listening connection: " +
		"it goes through a proxy that does not keep one server connection for it (PgBouncer in transaction pooling mode?); " +
		"open the store with ListenDSN set to a direct connection to the database"
}

// closeListener fans the notifications of one listening connection out to
// the waiters registered for each job.
type closeListener struct {
	config *pgx.ConnConfig // from ListenDSN; nil: the settings of the store's pool
	q      *pgStatements   // the store's statements: pgWatchJob, and the jobs table whose schema names the channel

	mu        sync.Mutex
	waiters   map[string]map[*closeWaiter]struct{} // by job ID
	count     int
	session   *listenSession // nil when nobody listens
	deaf      *deafError     // the last listening connection heard nothing
	deafUntil time.Time      // when to try listening again
	running   sync.WaitGroup // the sessions' goroutines
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

// ended reports whether the session's goroutine has returned (it stops on
// its own when the connection cannot hear notifications).
func (s *listenSession) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
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
	if l.deaf != nil && time.Now().Before(l.deafUntil) {
		err := l.deaf
		l.mu.Unlock()
		return nil, nil, err
	}
	if l.waiters == nil {
		l.waiters = map[string]map[*closeWaiter]struct{}{}
	}
	if l.waiters[jobID] == nil {
		l.waiters[jobID] = map[*closeWaiter]struct{}{}
	}
	l.waiters[jobID][w] = struct{}{}
	l.count++
	if l.session == nil || l.session.ended() {
		if l.session != nil {
			l.session.cancel() // it heard nothing and stopped; release its context
		}
		sctx, cancel := context.WithCancel(context.Background())
		l.session = &listenSession{cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
		l.running.Add(1)
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
	// Listening: now mark the job, so that its closing notifies. The
	// caller reads the job after this returns, which catches a close that
	// came first (see the column watched in 0001_init.sql). The mark stays
	// when the waiter leaves: it costs one notification too many, removing
	// it a write.
	if _, err := db.ExecContext(ctx, l.q.watchJob, jobID); err != nil {
		stop()
		return nil, nil, &StorageError{Op: "listen", Kind: StorageUnavailable, Message: "mark the job watched: " + err.Error()}
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
	}
	l.running.Wait()
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
// the waiters are woken after every reconnect. A connection that cannot
// hear notifications ends the session: waiters are woken, and new ones are
// told to poll for listenDeafRecheck.
func (l *closeListener) run(ctx context.Context, db *sql.DB, sess *listenSession) {
	defer l.running.Done()
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
		err := l.listen(ctx, db, func() {
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
		var deaf *deafError
		if errors.As(err, &deaf) {
			l.mu.Lock()
			l.deaf, l.deafUntil = deaf, time.Now().Add(listenDeafRecheck)
			l.mu.Unlock()
			ready(deaf)
			l.wakeAll()
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
		pause = min(2*pause, listenRetryMax)
	}
}

// listen opens a connection of its own, with the settings of ListenDSN or
// those of the connections of db, LISTENs on it, calls listening, then
// passes every notification's payload to notify until ctx ends or the
// connection fails. The connection is outside db's pool, so that waiters
// never take a slot that queries need; it is closed when listen returns.
// The channel is the one of the schema of the store's tables
// (pgClosedChannel), read through db.
//
// A connection whose backend is not the one that greeted it goes through a
// proxy. Notifications reach it only if the proxy keeps one server
// connection for it (PgBouncer's session pooling, not its transaction
// pooling): a probe notification sent from another session through db
// tells which, and listen returns a *deafError if it does not arrive.
func (l *closeListener) listen(ctx context.Context, db *sql.DB, listening func(), notify func(jobID string)) error {
	var cfg *pgx.ConnConfig
	if l.config != nil {
		cfg = l.config.Copy()
	} else {
		var err error
		if cfg, err = connConfig(ctx, db); err != nil {
			return err
		}
	}
	var channel string
	if err := db.QueryRowContext(ctx, pgClosedChannel, l.q.jobsTable).Scan(&channel); err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var backend uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeExec).Scan(&backend); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	if backend != conn.PgConn().PID() {
		if err := probe(ctx, conn, db, channel, notify); err != nil {
			var deaf *deafError
			if errors.As(err, &deaf) {
				deaf.direct = l.config != nil
			}
			return err
		}
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == channel {
			notify(n.Payload)
		}
	}
}

// probe sends a notification on channel through db, from another
// session than conn's, and waits for conn to hear it. Other notifications
// heard meanwhile go to notify. It returns a *deafError if the probe does
// not arrive within listenProbeTimeout.
func probe(ctx context.Context, conn *pgx.Conn, db *sql.DB, channel string, notify func(jobID string)) error {
	b := make([]byte, 8)
	rand.Read(b)
	token := "probe-" + hex.EncodeToString(b) // no job has this ID
	if _, err := db.ExecContext(ctx, "SELECT pg_notify($1, $2)", channel, token); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, listenProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(pctx)
		switch {
		case err != nil && pctx.Err() != nil && ctx.Err() == nil:
			return &deafError{}
		case err != nil:
			return err
		case n.Channel != channel:
		case n.Payload == token:
			return nil
		default:
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
