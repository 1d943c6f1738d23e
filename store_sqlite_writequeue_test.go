//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// holdWriteLock takes the write lock of the SQLite database at path through
// a file description of its own, as a store in another process does, until
// the returned function is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path+"-lock", os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			f.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func submitRequest(key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)}
}

// lockedWrite is what a case of TestSQLiteWritesWaitForTheWriteLock works on.
type lockedWrite struct {
	m   *jobs.Manager
	job jobs.Job
	att jobs.Attempt
}

func (w *lockedWrite) startAttempt(t *testing.T) {
	t.Helper()
	var err error
	if w.att, err = w.m.StartAttempt(t.Context(), w.job.ID, ""); err != nil {
		t.Fatal(err)
	}
}

// Every kind of write waits while another process holds the database's
// write lock, and when its context (or the write timeout) ends first it
// gives up with a storage error that matches the context's, having written
// nothing. Its wait, abandoned in the kernel, must not keep the lock once it
// comes free: the same write then succeeds.
func TestSQLiteWritesWaitForTheWriteLock(t *testing.T) {
	t.Parallel()
	const patience = 50 * time.Millisecond
	cases := []struct {
		name    string
		attempt bool // start an attempt before the lock is taken
		write   func(ctx context.Context, w *lockedWrite) error
	}{
		{"Submit", false, func(ctx context.Context, w *lockedWrite) error {
			_, _, err := w.m.Submit(ctx, submitRequest("new"))
			return err
		}},
		{"StartAttempt", false, func(ctx context.Context, w *lockedWrite) error {
			_, err := w.m.StartAttempt(ctx, w.job.ID, "")
			return err
		}},
		{"MarkRunning", true, func(ctx context.Context, w *lockedWrite) error {
			_, err := w.m.MarkRunning(ctx, w.att.ID, "ref")
			return err
		}},
		{"Complete", true, func(ctx context.Context, w *lockedWrite) error {
			_, err := w.m.Complete(ctx, w.att.ID, json.RawMessage(`{"ok":true}`))
			return err
		}},
		{"CancelJob", false, func(ctx context.Context, w *lockedWrite) error {
			_, err := w.m.CancelJob(ctx, w.job.ID, "not wanted")
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "jobs.db")
			store := testdb.NewSQLiteAt(t, path)
			// Outcome writes are bounded by the write timeout, not by ctx.
			w := &lockedWrite{m: jobstest.NewManager(t, store, jobs.Options{Logger: discard, WriteTimeout: patience})}
			var err error
			if w.job, _, err = w.m.Submit(t.Context(), submitRequest("old")); err != nil {
				t.Fatal(err)
			}
			if tc.attempt {
				w.startAttempt(t)
			}
			before, err := invariant.TakeSnapshot(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}

			release := holdWriteLock(t, path)
			ctx, cancel := context.WithTimeout(t.Context(), patience)
			err = tc.write(ctx, w)
			cancel()
			if !errors.Is(err, jobs.ErrStorage) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s while another process holds the write lock: %v, want a storage error matching context.DeadlineExceeded", tc.name, err)
			}
			after, err := invariant.TakeSnapshot(t.Context(), store)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Fatalf("%s wrote while another process held the write lock (-before +after):\n%s", tc.name, diff)
			}

			release()
			if err := tc.write(t.Context(), w); err != nil {
				t.Fatalf("%s after the lock was released: %v", tc.name, err)
			}
		})
	}
}

// SubmitTx in a transaction on the store's own connection goes through while
// another Submit of the store waits for that connection. The transaction
// holds the database already; were SubmitTx to wait for the store's turn to
// write, which the other Submit holds, it would wait for itself.
func TestSubmitTxWhileAnotherWriteWaitsForItsConnection(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		s, _ := sc.Open(t)
		store := s.(jobs.SQLStore)
		db := store.DB()
		db.SetMaxOpenConns(1) // PostgreSQL: one connection, like SQLite's writer
		m := jobstest.NewManager(t, store, jobs.Options{Logger: discard})
		ctx := t.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()

		waits := db.Stats().WaitCount
		outside := make(chan error, 1)
		go func() {
			_, _, err := m.Submit(ctx, submitRequest("outside"))
			outside <- err
		}()
		for db.Stats().WaitCount == waits {
			time.Sleep(time.Millisecond) // until the other Submit waits for the connection
		}

		// A bound, so that a regression fails instead of hanging the run.
		txCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		inside, created, err := m.SubmitTx(txCtx, tx, submitRequest("inside"))
		if err != nil || !created {
			t.Fatalf("SubmitTx while another Submit waits for the connection: created %v, %v", created, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-outside; err != nil {
			t.Fatalf("the other Submit: %v", err)
		}
		for _, key := range []string{"inside", "outside"} {
			j, err := m.GetByKey(ctx, "o", key)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if key == "inside" && j.ID != inside.ID {
				t.Errorf("inside: stored %s, SubmitTx returned %s", j.ID, inside.ID)
			}
		}
	})
}

// Every store of a database file, in whatever process and under whatever
// name of the file, queues on one lock file: the file's real name followed
// by "-lock". A database in memory, or opened read-only, has none.
func TestOpenSQLiteLockFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// open names the database in dir and returns its DSN and the lock
		// file that opening it must create ("" for none).
		open func(t *testing.T, dir string) (dsn, lock string)
	}{
		{"path", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "jobs.db")
			return p, p + "-lock"
		}},
		{"file URI with escapes and parameters", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "my jobs#1.db")
			return "file:" + (&url.URL{Path: p}).EscapedPath() + "?cache=private", p + "-lock"
		}},
		{"file URI with an authority", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "jobs.db")
			return "file://localhost" + p, p + "-lock"
		}},
		{"symbolic link", func(t *testing.T, dir string) (string, string) {
			real := filepath.Join(dir, "data", "jobs.db")
			if err := os.Mkdir(filepath.Dir(real), 0o755); err != nil {
				t.Fatal(err)
			}
			testdb.NewSQLiteAt(t, real).Close()
			if err := os.Remove(real + "-lock"); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "link.db")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link, real + "-lock"
		}},
		{"read-only", func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "jobs.db")
			testdb.NewSQLiteAt(t, p).Close()
			if err := os.Remove(p + "-lock"); err != nil {
				t.Fatal(err)
			}
			return "file:" + p + "?mode=ro", ""
		}},
		{":memory:", func(t *testing.T, dir string) (string, string) { return ":memory:", "" }},
		{"file::memory:", func(t *testing.T, dir string) (string, string) { return "file::memory:", "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dsn, lock := tc.open(t, dir)
			var opts []jobs.SQLiteOption
			if lock == "" && strings.Contains(dsn, "mode=ro") {
				opts = append(opts, jobs.SkipMigrations())
			}
			store, err := jobs.OpenSQLite(t.Context(), dsn, opts...)
			if err != nil {
				t.Fatalf("open %s: %v", dsn, err)
			}
			defer store.Close()
			m := jobstest.NewManager(t, store, jobs.Options{Logger: discard})
			j, _, err := m.Submit(t.Context(), submitRequest("k"))
			switch {
			case lock == "" && strings.Contains(dsn, "mode=ro"):
				if !errors.Is(err, jobs.ErrStorage) {
					t.Fatalf("Submit on a read-only database: %v, want a storage error", err)
				}
			case err != nil:
				t.Fatalf("Submit: %v", err)
			default:
				if got, err := m.Get(t.Context(), j.ID); err != nil || got.ID != j.ID {
					t.Fatalf("Get after Submit: %+v, %v", got, err)
				}
			}
			var locks []string
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if strings.HasSuffix(p, "-lock") {
					locks = append(locks, p)
				}
				return err
			})
			if want := []string{lock}; lock == "" && len(locks) > 0 || lock != "" && !slices.Equal(locks, want) {
				t.Errorf("lock files %q, want %q", locks, lock)
			}
			if _, err := os.Stat(dsn + "-lock"); dsn == ":memory:" && err == nil {
				t.Errorf("%s made a lock file in the working directory", dsn)
				os.Remove(dsn + "-lock")
			}
		})
	}
}

// A lock file that cannot be opened fails OpenSQLite with a storage error
// of kind unavailable that names it, before the database is created.
func TestOpenSQLiteLockFileRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	if err := os.Mkdir(path+"-lock", 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := jobs.OpenSQLite(t.Context(), path)
	if err == nil {
		store.Close()
		t.Fatal("OpenSQLite succeeded with a directory where its lock file goes")
	}
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != jobs.StorageUnavailable || !strings.Contains(err.Error(), path+"-lock") {
		t.Fatalf("OpenSQLite: %v, want a *StorageError of kind %s naming %s", err, jobs.StorageUnavailable, path+"-lock")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the database was created: %v", err)
	}
}

// Concurrent Submits of one new key to a SQLite store write once: the
// calls that find no job while another call of the store is creating it
// wait for that call instead of queueing to write too, and all return the
// one job, exactly one of them as created. The write lock is held
// meanwhile, so that all the calls are under way before the first can
// write.
func TestSQLiteConcurrentSubmitsOfOneKeyWriteOnce(t *testing.T) {
	t.Parallel()
	const callers = 16
	path := filepath.Join(t.TempDir(), "jobs.db")
	var writes atomic.Int64
	store, err := jobs.OpenSQLite(t.Context(), path, jobs.ObserveWriteWait(func(time.Duration) { writes.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := jobstest.NewManager(t, store, jobs.Options{Logger: discard})
	writes.Store(0) // the migration's
	release := holdWriteLock(t, path)
	type answer struct {
		job     jobs.Job
		created bool
		err     error
	}
	answers := make(chan answer, callers)
	for range callers {
		go func() {
			j, created, err := m.Submit(t.Context(), submitRequest("storm"))
			answers <- answer{j, created, err}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the calls reach the store; a late one only writes once more
	release()
	var ids []string
	created := 0
	for range callers {
		a := <-answers
		if a.err != nil {
			t.Fatal(a.err)
		}
		ids = append(ids, a.job.ID)
		if a.created {
			created++
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 1 || created != 1 {
		t.Errorf("jobs %v, %d created; want one job, created once", ids, created)
	}
	if n := writes.Load(); n >= callers {
		t.Errorf("%d writes for %d concurrent Submits of one key, want fewer", n, callers)
	}
}
