package jobs

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Writing: every write waits its turn in the write queue, then runs, and
// runs again while SQLite says it is busy (a writer outside the queue has
// the lock), until ctx ends.

// returning runs a write that returns one row (UPDATE … RETURNING) on the
// writer connection, outside a transaction, and gives the row to scan. It
// reads the statement to its end: SQLite runs its automatic checkpoint
// after a write when the write's statement finishes, not when a statement
// read for one row is reset, as database/sql's QueryRow resets it, and
// writes read that way never checkpoint the write-ahead log, which grows
// by every page they write until another write does
// (TestSQLiteWritesKeepTheLogBounded). Like inTx, it runs on go-sqlite3's
// connection itself where it can.
func (s *SQLiteStore) returning(ctx context.Context, scan func(scanner) error, query string, args ...any) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return sqliteStatements(conn, func(st sqliteConnStatements) error {
		return scan(st.writeRow(ctx, query, args...))
	})
}

// writeOne runs fn, one statement through the writer connection, in its
// turn.
func (s *SQLiteStore) writeOne(ctx context.Context, op string, fn func() error) error {
	return s.write(ctx, op, func(locked func()) error {
		err := fn()
		if !sqliteBusy(err) {
			locked()
		}
		return err
	})
}

// inTx runs fn inside an immediate transaction on the writer connection, in
// its turn: the write lock is taken at BEGIN, where a busy wait can be
// retried. Once BEGIN holds the lock, nothing the transaction does waits
// for anyone (in WAL, COMMIT takes no further lock), so fn's statements and
// the COMMIT or ROLLBACK run to their end even if ctx is cancelled
// meanwhile: fn gets ctx without its cancellation. A statement run with a
// context that can be cancelled costs the driver a goroutine (an Exec) or
// a callback registered on the context (a query), to interrupt it. The
// statements, BEGIN and COMMIT included, run on the driver's connection
// itself where it is go-sqlite3's (sqliteStatements); fn must not use the
// store's handles meanwhile, as the connection is held.
//
// On a store with a write queue (OpenSQLite's), the transactions of inTx
// that wait for their turn together are committed together (txLine): fn
// may run in another caller's goroutine, and must only write to what its
// caller reads after inTx returns.
func (s *SQLiteStore) inTx(ctx context.Context, op string, fn func(ctx context.Context, st sqliteConnStatements) error) error {
	if s.queue == nil {
		return s.withWriter(ctx, op, func(conn *sql.Conn, locked func()) error {
			return sqliteStatements(conn, func(st sqliteConnStatements) error {
				return s.transact(ctx, op, st, locked, func(held context.Context) error { return fn(held, st) })
			})
		})
	}
	t := &lineTx{ctx: ctx, op: op, fn: fn, locked: s.waitObserver(), done: make(chan struct{})}
	s.line.join(t)
	if err := s.queue.lock(ctx, t.done); err != nil {
		if err != errTaken && s.line.leave(t) {
			return s.interpret(op, err)
		}
		<-t.done
		return t.err
	}
	defer s.queue.unlock()
	if s.line.isTaken(t) { // by the batch that held the turn before
		<-t.done
		return t.err
	}
	err := retryBusy(ctx, func() error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.interpret(op, err)
		}
		defer conn.Close()
		return sqliteStatements(conn, func(st sqliteConnStatements) error {
			if _, err := st.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
				return s.interpret(op, err)
			}
			limit := maxLineBatch
			if _, known := st.autocommit(); !known {
				limit = 1 // it could not tell a batch SQLite rolled back whole
			}
			s.commitBatch(st, s.line.take(t, limit))
			return nil
		})
	})
	if err != nil && s.line.leave(t) { // never began: the next writer in line leads
		return err
	}
	<-t.done
	return t.err
}

// maxLineBatch is the most transactions txLine commits together.
const maxLineBatch = 64

// txLine is the line of inTx's transactions waiting for their turn to
// write. The one whose turn comes (the leader) begins a transaction, takes
// every transaction in line, its own among them, runs each in a savepoint
// of its own, and commits once (commitBatch).
//
// Under SQLite's write lock most of a small transaction's time is its
// commit: every page it changed is appended to the write-ahead log whole
// (a Complete changes four: the rows of the job and the attempt, and a
// page of each of two partial indexes), the log's index in shared memory
// is updated and, at synchronous=FULL, the log is synced. Transactions
// committed together write a page they share once, and sync once.
//
// Each keeps its own outcome. One whose fn fails is rolled back to its
// savepoint and the others go on; each sees the writes of those before it,
// exactly as if they had run one after another. What differs is only that
// they become durable together: none returns before the commit, and if
// the commit fails, none of them wrote anything and each gets its error.
// A caller whose ctx ends while it waits in line leaves it, having written
// nothing; once taken, its transaction runs to its end, as once BEGIN
// holds the lock. If SQLite rolls the whole transaction back on its own
// (an I/O error, a full disk, no memory), every transaction of the batch
// gets an error of that kind and none wrote anything.
type txLine struct {
	mu      sync.Mutex
	waiting []*lineTx
	batch   []*lineTx // the last batch taken, whose array take reuses
}

// lineTx is one inTx call in txLine.
type lineTx struct {
	ctx    context.Context
	op     string
	fn     func(ctx context.Context, st sqliteConnStatements) error
	locked func()        // see waitObserver
	done   chan struct{} // closed when err is its outcome, before the leader's turn ends
	err    error
	isIn   bool // in line (under txLine.mu)
}

func (l *txLine) join(t *lineTx) {
	l.mu.Lock()
	t.isIn = true
	l.waiting = append(l.waiting, t)
	l.mu.Unlock()
}

// leave takes t out of line and reports whether it was still there: false
// means a leader took it, and its outcome will come on t.done.
func (l *txLine) leave(t *lineTx) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !t.isIn {
		return false
	}
	t.isIn = false
	l.waiting = slices.DeleteFunc(l.waiting, func(w *lineTx) bool { return w == t })
	return true
}

// isTaken reports whether a leader took t.
func (l *txLine) isTaken(t *lineTx) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !t.isIn
}

// take takes leader and up to limit-1 others out of line, first come
// first. The batch it returns is reused by the next leader's take.
func (l *txLine) take(leader *lineTx, limit int) []*lineTx {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.batch)
	batch := append(l.batch[:0], leader)
	l.waiting = slices.DeleteFunc(l.waiting, func(w *lineTx) bool {
		if w == leader {
			return true
		}
		if len(batch) == limit {
			return false
		}
		batch = append(batch, w)
		return true
	})
	for _, t := range batch {
		t.isIn = false
	}
	l.batch = batch
	return batch
}

// commitBatch runs the batch's transactions in the transaction st has
// begun, each in a savepoint when there are several, commits, sets every
// transaction's err and closes its done.
func (s *SQLiteStore) commitBatch(st sqliteConnStatements, batch []*lineTx) {
	defer func() {
		for _, t := range batch {
			close(t.done)
		}
	}()
	if s.onBatch != nil {
		s.onBatch(len(batch))
	}
	bg := context.Background() // the statements of a transaction begun run to their end
	several := len(batch) > 1
	for i, t := range batch {
		if err := t.ctx.Err(); err != nil && i > 0 {
			t.err = s.interpret(t.op, err) // ended while in line: nothing written
			continue
		}
		t.locked()
		held := t.ctx
		if held.Done() != nil {
			held = context.WithoutCancel(held)
		}
		if several {
			if _, err := st.exec(bg, "SAVEPOINT jobs_tx"); err != nil {
				s.abandonBatch(st, batch, s.interpret(t.op, err))
				return
			}
		}
		err := t.fn(held, st)
		if err == nil && several {
			_, err = st.exec(bg, "RELEASE jobs_tx")
			if err != nil {
				err = s.interpret(t.op, err)
			}
		}
		if err == nil {
			continue
		}
		t.err = err
		if !several {
			st.exec(bg, "ROLLBACK")
			return
		}
		if on, _ := st.autocommit(); on {
			// SQLite rolled the whole transaction back.
			s.abandonBatch(st, batch, err)
			return
		}
		if _, err := st.exec(bg, "ROLLBACK TO jobs_tx"); err != nil {
			s.abandonBatch(st, batch, s.interpret(t.op, err))
			return
		}
		if _, err := st.exec(bg, "RELEASE jobs_tx"); err != nil {
			s.abandonBatch(st, batch, s.interpret(t.op, err))
			return
		}
	}
	err := s.commit(st, batch)
	if err == nil {
		return
	}
	st.exec(bg, "ROLLBACK")
	for _, t := range batch {
		if t.err == nil {
			t.err = s.interpret(t.op, err)
		}
	}
}

// commit commits st's transaction. A COMMIT that finds SQLite busy (in a
// journal mode other than WAL, while a reader holds the database) leaves
// the transaction open, and is retried as long as a caller of the batch
// still waits for it.
func (s *SQLiteStore) commit(st sqliteConnStatements, batch []*lineTx) error {
	for {
		_, err := st.exec(context.Background(), "COMMIT")
		if !sqliteBusy(err) {
			return err
		}
		if on, known := st.autocommit(); on || !known {
			return err
		}
		live := func(t *lineTx) bool { return t.ctx.Err() == nil }
		if !slices.ContainsFunc(batch, live) || !pause(context.Background()) {
			return err
		}
	}
}

// abandonBatch ends a batch whose transaction cannot go on, because cause:
// it is rolled back, and every transaction of the batch without an error
// of its own gets one of cause's kind.
func (s *SQLiteStore) abandonBatch(st sqliteConnStatements, batch []*lineTx, cause error) {
	st.exec(context.Background(), "ROLLBACK")
	kind := StorageOther
	var se *StorageError
	if errors.As(cause, &se) {
		kind = se.Kind
	}
	for _, t := range batch {
		if t.err == nil {
			t.err = &StorageError{Op: t.op, Kind: kind, Message: "rolled back with the writes committed with it: " + cause.Error()}
		}
	}
}

// inConnTx is inTx for a transaction whose statements run through
// database/sql on conn: those that read many rows, or share their code
// with the statements of a caller's transaction (DBTX).
func (s *SQLiteStore) inConnTx(ctx context.Context, op string, fn func(ctx context.Context, conn *sql.Conn) error) error {
	return s.withWriter(ctx, op, func(conn *sql.Conn, locked func()) error {
		return s.transact(ctx, op, connStatements{conn}, locked, func(held context.Context) error { return fn(held, conn) })
	})
}

// withWriter runs fn with the writer connection, in the caller's turn.
func (s *SQLiteStore) withWriter(ctx context.Context, op string, fn func(conn *sql.Conn, locked func()) error) error {
	return s.write(ctx, op, func(locked func()) error {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return s.interpret(op, err)
		}
		defer conn.Close()
		return fn(conn, locked)
	})
}

// transact runs body between BEGIN IMMEDIATE and COMMIT on st, or rolls
// back if body or the COMMIT fails. body gets ctx without its cancellation.
func (s *SQLiteStore) transact(ctx context.Context, op string, st sqliteConnStatements, locked func(), body func(held context.Context) error) error {
	if _, err := st.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.interpret(op, err)
	}
	locked()
	held := ctx
	if held.Done() != nil {
		held = context.WithoutCancel(ctx)
	}
	if err := body(held); err != nil {
		st.exec(held, "ROLLBACK")
		return err
	}
	if _, err := st.exec(held, "COMMIT"); err != nil {
		st.exec(held, "ROLLBACK")
		return s.interpret(op, err)
	}
	return nil
}

// write runs fn in the caller's turn in the write queue. fn calls locked as
// soon as it holds SQLite's write lock, so that the wait can be observed
// (ObserveWriteWait). The turn is kept across retries (retryBusy).
func (s *SQLiteStore) write(ctx context.Context, op string, fn func(locked func()) error) error {
	locked := s.waitObserver()
	if err := s.queue.lock(ctx, nil); err != nil {
		return s.interpret(op, err)
	}
	defer s.queue.unlock()
	return retryBusy(ctx, func() error { return fn(locked) })
}

// waitObserver returns the function a write calls once it holds SQLite's
// write lock, which reports the time since waitObserver was called to
// ObserveWriteWait's function, once.
func (s *SQLiteStore) waitObserver() func() {
	if s.onWriteWait == nil {
		return func() {}
	}
	start := time.Now()
	observed := false
	return func() {
		if !observed {
			observed = true
			s.onWriteWait(time.Since(start))
		}
	}
}

// retryBusy runs fn until it does not find SQLite busy, or ctx ends. A
// writer that finds SQLite busy keeps its turn in the queue. Retries pause
// 1 to 3 ms: a writer that waits is already in line, and a longer sleep
// would only miss the moment the lock comes free.
func retryBusy(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if !sqliteBusy(err) || !pause(ctx) {
			return err
		}
	}
}

// pause sleeps 1 to 3 ms and reports whether ctx is still live after.
func pause(ctx context.Context) bool {
	t := time.NewTimer(time.Millisecond + rand.N(2*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return ctx.Err() == nil
	}
}

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
// Neither stage costs more than it must when nobody waits: the turn is
// taken without a select on ctx, and the OS lock with one flock(2) on a
// descriptor of the lock file the store keeps open (own). Only a writer
// that finds the OS lock taken opens the file anew to wait for it, so that
// a wait given up when ctx ends can finish on a file of its own.
//
// A nil *writeQueue queues nothing: stores over a caller's *sql.DB.
type writeQueue struct {
	turn     chan struct{} // one slot: holding it is this store's turn
	waiting  atomic.Int32  // goroutines waiting for the turn
	lockPath string        // the shared lock file; "" for none (":memory:")
	own      *lockFile     // the lock file, open while the store is
	ownHeld  bool          // own is locked
	held     io.Closer     // a lock file opened to wait, while it is locked; closing unlocks it
}

// newWriteQueue returns a queue whose writers take an exclusive lock on the
// file at lockPath, or only queue within the store when lockPath is "".
func newWriteQueue(lockPath string) *writeQueue {
	return &writeQueue{turn: make(chan struct{}, 1), lockPath: lockPath}
}

// create opens the lock file, creating it if needed, and keeps it open, so
// that a directory that refuses it is reported when the store is opened.
func (q *writeQueue) create() error {
	f, err := openLockFile(q.lockPath)
	if err != nil {
		return err
	}
	q.own = f
	return nil
}

// close closes the lock file create opened.
func (q *writeQueue) close() error {
	if q == nil || q.own == nil {
		return nil
	}
	return q.own.Close()
}

// errTaken is what lock returns when ran is closed first.
var errTaken = errors.New("jobs: taken into a batch")

// lock waits until it is the caller's turn to write, until ctx ends (then
// it returns ctx's error), or until ran is closed (then it returns
// errTaken: the caller's transaction ran in another writer's batch, see
// txLine); ran may be nil. Every successful lock must be followed by one
// unlock.
func (q *writeQueue) lock(ctx context.Context, ran <-chan struct{}) error {
	if q == nil {
		return nil
	}
	select {
	case q.turn <- struct{}{}:
	default:
		q.waiting.Add(1)
		select {
		case q.turn <- struct{}{}:
		case <-ran:
			q.waiting.Add(-1)
			return errTaken
		case <-ctx.Done():
			q.waiting.Add(-1)
			return ctx.Err()
		}
		q.waiting.Add(-1)
		select {
		case <-ran: // that too, while the turn came free
			<-q.turn
			return errTaken
		default:
		}
	}
	if q.lockPath == "" {
		return nil
	}
	if q.own != nil && q.own.tryLock() {
		q.ownHeld = true
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
	if q.ownHeld {
		q.own.unlock()
		q.ownHeld = false
	}
	if q.held != nil {
		q.held.Close()
		q.held = nil
	}
	<-q.turn
	// Hand the turn over now, if a writer waits for it. The receive has
	// made the next writer runnable, but on this goroutine's processor,
	// where it runs only once this goroutine blocks: until then the next
	// write would wait for whatever the caller does after its write (a
	// Submit returning, the next request being checked and fingerprinted),
	// and the writes of a busy store would be spaced by that work.
	if q.waiting.Load() > 0 {
		runtime.Gosched()
	}
}

// busy reports whether another writer holds the turn: a write would wait.
// A nil queue is never busy.
func (q *writeQueue) busy() bool { return q != nil && len(q.turn) > 0 }
