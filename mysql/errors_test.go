package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// The faults of the database, each driven for real: the store retries a
// transaction that a concurrent one made fail, whole and a bounded number
// of times, and every failure reaches the caller as a *jobs.StorageError,
// never the driver's error.

// retries records the retries of a store (ObserveRetry).
type retries struct {
	mu    sync.Mutex
	codes []string
	first chan struct{} // closed at the first retry
	once  sync.Once
}

func newRetries() *retries { return &retries{first: make(chan struct{})} }

func (r *retries) observe(op string, err error) {
	var se *jobs.StorageError
	code := "?"
	if errors.As(err, &se) {
		code = se.Code
	}
	r.mu.Lock()
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	r.once.Do(func() { close(r.first) })
}

func (r *retries) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.codes...)
}

// withParams returns dsn with the session variables params.
func withParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// adminDB opens a plain handle on the database of dsn, as another
// application would.
func adminDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// lockJob begins a transaction on db that holds the job's row lock, until
// the returned function rolls it back.
func lockJob(t testing.TB, db *sql.DB, jobID string) (*sql.Tx, func()) {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := tx.QueryRow(`SELECT id FROM intentjobs_jobs WHERE id = ? FOR UPDATE`, jobID).Scan(&id); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { tx.Rollback() }) }
	t.Cleanup(release)
	return tx, release
}

// waitForLockWait waits until a session on database dbName waits for a
// row lock, and returns its connection ID. It fails the test if the call
// that should wait (done receives its error) returns first.
//
// InnoDB lists the wait in INNODB_TRX, but not always: a locking read of
// a row by its primary key happens while the statement is optimized
// (PROCESSLIST says "Statistics"), and MariaDB may leave that transaction
// out of INNODB_TRX while it waits. So a statement that has been running
// on dbName for a quarter of a second counts too: nothing else the tests
// run there takes that long without waiting.
func waitForLockWait(t testing.TB, db *sql.DB, dbName string, done <-chan error) int64 {
	t.Helper()
	running := map[int64]time.Time{}
	for {
		select {
		case err := <-done:
			t.Fatalf("the call returned before it waited for a lock: %v", err)
		default:
		}
		var id int64
		err := db.QueryRow(`SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t
		    JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		    WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ? LIMIT 1`, dbName).Scan(&id)
		if err == nil {
			return id
		}
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		rows, err := db.Query(`SELECT ID FROM information_schema.PROCESSLIST
		    WHERE DB = ? AND COMMAND = 'Query' AND ID <> CONNECTION_ID()`, dbName)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		seen := map[int64]time.Time{}
		for rows.Next() {
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			since, ok := running[id]
			if !ok {
				since = now
			}
			if now.Sub(since) >= 250*time.Millisecond {
				rows.Close()
				return id
			}
			seen[id] = since
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		running = seen
		time.Sleep(5 * time.Millisecond)
	}
}

// withDB returns dsn naming the database name instead.
func withDB(t testing.TB, dsn, name string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

func dbName(t testing.TB, dsn string) string {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
}

// A lock wait timeout (1205) rolls the store's transaction back, and the
// store runs it again until it goes through: the job is closed once.
func TestLockWaitTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	r := newRetries()
	s := openStoreAt(t, withParams(t, dsn, map[string]string{"innodb_lock_wait_timeout": "1"}), mysql.ObserveRetry(r.observe))
	m, _ := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	_, unlock := lockJob(t, adminDB(t, dsn), j.ID)
	done := make(chan error, 1)
	var got jobs.Job
	go func() {
		var err error
		got, err = m.CancelJob(ctx, j.ID, "stop")
		done <- err
	}()
	<-r.first
	unlock()
	if err := <-done; err != nil {
		t.Fatalf("CancelJob after a lock wait timeout: %v", err)
	}
	if got.State != jobs.JobCancelled || got.Version != 2 {
		t.Fatalf("job = %s v%d; want cancelled at version 2 (one write)", got.State, got.Version)
	}
	if codes := r.seen(); len(codes) == 0 || codes[0] != "1205" {
		t.Fatalf("retries = %v; want 1205 first", codes)
	}
	t.Logf("retries: %v", r.seen())
}

// Retries are bounded: a lock held for longer than MaxRetries lock wait
// timeouts is a StorageError of kind busy, and nothing is written.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	r := newRetries()
	s := openStoreAt(t, withParams(t, dsn, map[string]string{"innodb_lock_wait_timeout": "1"}),
		mysql.MaxRetries(2), mysql.ObserveRetry(r.observe))
	m, _ := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	_, unlock := lockJob(t, adminDB(t, dsn), j.ID)
	_, err = m.CancelJob(ctx, j.ID, "stop")
	unlock()
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageBusy || se.Code != "1205" {
		t.Fatalf("CancelJob under a lock held throughout: %v; want a StorageError busy (1205)", err)
	}
	if n := len(r.seen()); n != 1 {
		t.Fatalf("%d retries; want 1 (MaxRetries(2): two tries)", n)
	}
	if got, err := m.Get(ctx, j.ID); err != nil || got.State != jobs.JobPending || got.Version != 1 {
		t.Fatalf("job after the refused close = %s v%d, %v; want pending v1", got.State, got.Version, err)
	}
}

// A deadlock (1213) makes InnoDB roll back the smaller transaction, here
// the store's Complete: the store runs it again, and the job is completed
// once, by it.
func TestDeadlockIsRetried(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	r := newRetries()
	s := openStoreAt(t, dsn, mysql.ObserveRetry(r.observe))
	m, _ := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	admin := adminDB(t, dsn)
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A transaction heavier than Complete's, so that InnoDB chooses
	// Complete as the victim: it wrote many rows.
	for i := range 50 {
		if _, err := tx.Exec(`INSERT INTO intentjobs_verifications (id, provider, kind, contract_version, passed, verified_at)
		    VALUES (?, 'p', 'k', 'v', TRUE, '2026-01-02')`, fmt.Sprintf("ver_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(`SELECT id FROM intentjobs_jobs WHERE id = ? FOR UPDATE`, j.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Complete(ctx, a.ID, json.RawMessage(`{"ok":true}`))
		done <- err
	}()
	// Complete holds the attempt's lock and waits for the job's; asking
	// for the attempt's closes the cycle.
	waitForLockWait(t, admin, dbName(t, dsn), done)
	if _, err := tx.Exec(`SELECT id FROM intentjobs_attempts WHERE id = ? FOR UPDATE`, a.ID); err != nil {
		t.Fatalf("the heavier transaction was the deadlock's victim: %v", err)
	}
	tx.Rollback()
	if err := <-done; err != nil {
		t.Fatalf("Complete after a deadlock: %v", err)
	}
	if codes := r.seen(); len(codes) == 0 || codes[0] != "1213" {
		t.Fatalf("retries = %v; want 1213 first", codes)
	}
	got, err := m.Get(ctx, j.ID)
	if err != nil || got.State != jobs.JobSucceeded || got.CompletedBy != a.ID || got.Version != 2 {
		t.Fatalf("job = %+v, %v; want succeeded by %s at version 2", got, err, a.ID)
	}
}

// A connection killed under a write (KILL CONNECTION) is a StorageError of
// kind unavailable, typed; the transaction it was in wrote nothing, and
// the store goes on with new connections.
func TestKilledConnection(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	s := openStoreAt(t, dsn)
	m, _ := newManager(t, s)
	ctx := t.Context()
	j, _, err := m.Submit(ctx, charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	admin := adminDB(t, dsn)
	_, unlock := lockJob(t, admin, j.ID)
	done := make(chan error, 1)
	go func() {
		_, err := m.CancelJob(ctx, j.ID, "stop")
		done <- err
	}()
	id := waitForLockWait(t, admin, dbName(t, dsn), done)
	if _, err := admin.Exec("KILL CONNECTION " + strconv.FormatInt(id, 10)); err != nil {
		t.Fatal(err)
	}
	err = <-done
	unlock()
	var se *jobs.StorageError
	var me *gomysql.MySQLError
	var ne net.Error
	if !errors.As(err, &se) || se.Kind != jobs.StorageUnavailable || errors.As(err, &me) || errors.As(err, &ne) ||
		errors.Is(err, gomysql.ErrInvalidConn) {
		t.Fatalf("CancelJob on a killed connection: %#v; want a StorageError of kind unavailable, and no driver error", err)
	}
	if got, err := m.Get(ctx, j.ID); err != nil || got.State != jobs.JobPending || got.Version != 1 {
		t.Fatalf("job after the killed close = %s v%d, %v; want pending v1", got.State, got.Version, err)
	}
	if got, err := m.CancelJob(ctx, j.ID, "stop"); err != nil || got.State != jobs.JobCancelled {
		t.Fatalf("CancelJob again: %s, %v", got.State, err)
	}
}

// In the caller's transaction the store retries nothing: a lock wait
// timeout there is a StorageError of kind conflict, for the caller to run
// its transaction again.
func TestConflictInCallerTransaction(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	s := openStoreAt(t, dsn)
	m, _ := newManager(t, s)
	ctx := t.Context()
	// Another transaction inserted the key and has not committed.
	other, err := adminDB(t, dsn).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, _, err := m.SubmitTx(ctx, other, charge("o", "k")); err != nil {
		t.Fatal(err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
		t.Fatal(err)
	}
	_, _, err = m.SubmitTx(ctx, tx, charge("o", "k"))
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageConflict || se.Code != "1205" {
		t.Fatalf("SubmitTx waiting for an uncommitted duplicate: %v; want a StorageError of kind conflict (1205)", err)
	}
	tx.Rollback()
	if _, err := s.DB().Exec(`SET SESSION innodb_lock_wait_timeout = 50`); err != nil {
		t.Fatal(err)
	}
}

// A table missing is a StorageError of kind schema.
func TestMissingTable(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	s := openStoreAt(t, dsn)
	if _, err := adminDB(t, dsn).Exec(`DROP TABLE intentjobs_verifications`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Verifications(t.Context(), jobs.VerificationFilter{})
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageSchema || se.Code != "1146" {
		t.Fatalf("Verifications without its table: %v; want a StorageError of kind schema (1146)", err)
	}
}

// A server that does not answer is a StorageError of kind unavailable,
// from Open as from every call.
func TestNoServer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = mysql.Open(t.Context(), "root@tcp("+addr+")/test?timeout=2s")
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageUnavailable {
		t.Fatalf("Open on a closed port: %v; want a StorageError of kind unavailable", err)
	}
	if _, err := mysql.Open(t.Context(), "not a dsn"); !errors.Is(err, jobs.ErrInvalidInput) {
		t.Fatalf("Open with a DSN the driver cannot parse: %v; want ErrInvalidInput", err)
	}
}
