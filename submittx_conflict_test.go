package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// conflictDeadline bounds a SubmitTx that would retry inside the caller's
// transaction until its context ends. The tests assert the error's kind: a
// SubmitTx that spins until this deadline returns another kind.
const conflictDeadline = 10 * time.Second

// wantConflict fails the test unless err is a StorageConflict that matches
// ErrStorage and was not the context's end.
func wantConflict(t *testing.T, err error, code string) {
	t.Helper()
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageConflict || !errors.Is(err, jobs.ErrStorage) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("SubmitTx: %v; want a StorageError of kind conflict", err)
	}
	if code != "" && se.Code != code {
		t.Errorf("SubmitTx: code %q; want %q", se.Code, code)
	}
}

func txRequest(key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: "o", Key: key, Kind: "charge", Provider: "p", Params: json.RawMessage(`{"amount":1}`)}
}

// A caller's deferred SQLite transaction that has read cannot become a
// writer while another connection writes, nor once another connection has
// committed since its read: SQLite answers SQLITE_BUSY or
// SQLITE_BUSY_SNAPSHOT, which no retry inside that transaction can cure.
// SubmitTx returns StorageConflict at once instead of retrying until its
// context ends; the job is not written, and the caller's transaction run
// again from the start creates it.
func TestSubmitTxConflictInDeferredSQLiteTransaction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// interfere writes through another connection after the caller's
		// transaction read; the returned function ends that write.
		interfere func(t *testing.T, m *jobs.Manager, other *sql.DB) (release func())
		code      string
	}{
		{"another connection committed after the read", func(t *testing.T, m *jobs.Manager, _ *sql.DB) func() {
			if _, _, err := m.Submit(context.Background(), txRequest("someone else's")); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}, "517"}, // SQLITE_BUSY_SNAPSHOT
		{"another connection holds the write lock", func(t *testing.T, _ *jobs.Manager, other *sql.DB) func() {
			tx, err := other.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`UPDATE intentjobs_jobs SET updated_at = updated_at`); err != nil {
				t.Fatal(err)
			}
			return func() { tx.Rollback() }
		}, "5"}, // SQLITE_BUSY
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "jobs.db")
			m, err := jobs.New(testdb.NewSQLiteAt(t, path), jobs.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			// The caller's own handles: deferred transactions (the driver's
			// default), and a busy timeout, as docs/stores.md asks of handles passed in.
			open := func() *sql.DB {
				db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
			caller, other := open(), open()
			ctx, cancel := context.WithTimeout(context.Background(), conflictDeadline)
			defer cancel()

			tx, err := caller.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM intentjobs_jobs`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			release := tc.interfere(t, m, other)
			_, _, err = m.SubmitTx(ctx, tx, txRequest("mine"))
			release()
			tx.Rollback()
			wantConflict(t, err, tc.code)

			if _, err := m.GetByKey(context.Background(), "o", "mine"); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("after the conflict: %v; want nothing written", err)
			}
			// Run again from the start, the caller's transaction succeeds.
			tx, err = caller.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			j, created, err := m.SubmitTx(ctx, tx, txRequest("mine"))
			if err != nil || !created {
				t.Fatalf("SubmitTx run again: %v, created=%v", err, created)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if got, err := m.GetByKey(context.Background(), "o", "mine"); err != nil || got.ID != j.ID {
				t.Fatalf("after the commit: %v", err)
			}
		})
	}
}

// Under REPEATABLE READ, a caller's transaction whose snapshot predates
// another transaction's commit of the same key cannot insert it nor see it:
// PostgreSQL answers 40001 and aborts the transaction. SubmitTx reports a
// StorageConflict, whether the duplicate committed before SubmitTx ran or
// while SubmitTx waited for it; the caller's transaction run again returns
// the other job.
func TestSubmitTxConflictUnderPostgresRepeatableRead(t *testing.T) {
	t.Parallel()
	for _, whileWaiting := range []bool{false, true} {
		name := "duplicate committed before"
		if whileWaiting {
			name = "duplicate committed while SubmitTx waits for it"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testdb.NewPostgres(t)
			m, err := jobs.New(s, jobs.Options{Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), conflictDeadline)
			defer cancel()

			tx, err := s.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var pid int
			if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil { // takes the snapshot
				t.Fatal(err)
			}
			other, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback()
			theirs, created, err := m.SubmitTx(ctx, other, txRequest("k"))
			if err != nil || !created {
				t.Fatalf("the other transaction's SubmitTx: %v, created=%v", err, created)
			}
			var submitErr error
			if whileWaiting {
				done := make(chan error, 1)
				go func() {
					_, _, err := m.SubmitTx(ctx, tx, txRequest("k"))
					done <- err
				}()
				waitForLock(t, s.DB(), pid)
				if err := other.Commit(); err != nil {
					t.Fatal(err)
				}
				submitErr = <-done
			} else {
				if err := other.Commit(); err != nil {
					t.Fatal(err)
				}
				_, _, submitErr = m.SubmitTx(ctx, tx, txRequest("k"))
			}
			wantConflict(t, submitErr, "40001")
			tx.Rollback()

			again, err := s.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer again.Rollback()
			j, created, err := m.SubmitTx(ctx, again, txRequest("k"))
			if err != nil || created || j.ID != theirs.ID {
				t.Fatalf("SubmitTx run again: %v, created=%v, job %s; want the other's %s", err, created, j.ID, theirs.ID)
			}
		})
	}
}

// Two callers' transactions that each submitted a key and then submit the
// other's deadlock; PostgreSQL aborts one with 40P01. SubmitTx reports a
// StorageConflict to that one, and the other goes on to commit both jobs.
func TestSubmitTxConflictOnPostgresDeadlock(t *testing.T) {
	t.Parallel()
	s := testdb.NewPostgres(t)
	m, err := jobs.New(s, jobs.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), conflictDeadline)
	defer cancel()

	var txs [2]*sql.Tx
	var pids [2]int
	for i, key := range []string{"k0", "k1"} {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pids[i]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.SubmitTx(ctx, tx, txRequest(key)); err != nil {
			t.Fatal(err)
		}
		txs[i] = tx
	}
	errs := make(chan error, 2)
	go func() { _, _, err := m.SubmitTx(ctx, txs[0], txRequest("k1")); errs <- err }()
	waitForLock(t, s.DB(), pids[0])
	go func() { _, _, err := m.SubmitTx(ctx, txs[1], txRequest("k0")); errs <- err }()
	first, second := <-errs, <-errs
	if first != nil && second != nil {
		t.Fatalf("both transactions failed: %v; %v", first, second)
	}
	victim := first
	if victim == nil {
		victim = second
	}
	wantConflict(t, victim, "40P01")
	// Whichever survived holds both keys.
	for _, tx := range txs {
		if tx.Commit() == nil {
			for _, key := range []string{"k0", "k1"} {
				if _, err := m.GetByKey(ctx, "o", key); err != nil {
					t.Errorf("%s after the survivor's commit: %v", key, err)
				}
			}
			return
		}
	}
	t.Fatal("neither transaction committed")
}

// waitForLock returns once the backend pid waits for a lock.
func waitForLock(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	deadline := time.Now().Add(conflictDeadline)
	for {
		var waiting bool
		err := db.QueryRow(`SELECT COALESCE(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never waited for a lock", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
