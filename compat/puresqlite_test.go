package compat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// These tests run jobs' SQLite store over modernc.org/sqlite, a driver in
// pure Go: CI runs them with CGO_ENABLED=0 too, where the library has no
// go-sqlite3 at all.

// newModerncStore opens a store over a new SQLite file through
// modernc.org/sqlite, with the settings of moderncDSN.
func newModerncStore(t testing.TB) *jobs.SQLiteStore {
	t.Helper()
	db, err := sql.Open("sqlite", moderncDSN(filepath.Join(t.TempDir(), "jobs.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := jobs.NewSQLiteStore(context.Background(), db)
	if err != nil {
		t.Fatalf("NewSQLiteStore over modernc.org/sqlite: %v", err)
	}
	return s
}

// TestPureGoSQLiteConformance runs the whole conformance suite on the
// SQLite store over modernc.org/sqlite.
func TestPureGoSQLiteConformance(t *testing.T) {
	t.Parallel()
	jobstest.Run(t, func(t testing.TB) jobs.Store { return newModerncStore(t) })
}

// TestPureGoSQLiteBusyIsAStorageError holds SQLite's locks from another
// connection and checks that what modernc.org/sqlite reports is read by
// its result code: a read shut out by an exclusive lock is StorageBusy
// (SQLITE_BUSY, 5), and a SubmitTx whose deferred transaction cannot
// become a writer is StorageConflict, with the code SQLite gave. Every
// connection has a busy timeout of zero, so that SQLite answers at once.
func TestPureGoSQLiteBusyIsAStorageError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name    string
		journal string // the database's journal mode
		lock    string // what the other connection runs and holds
		call    func(m *jobs.Manager, db *sql.DB, jobID string) error
		kind    jobs.StorageKind
		codes   []string // SQLite's extended result codes that may come back
	}{
		{"read under an exclusive lock", "DELETE", "BEGIN EXCLUSIVE",
			func(m *jobs.Manager, _ *sql.DB, jobID string) error {
				_, err := m.Get(ctx, jobID)
				return err
			}, jobs.StorageBusy, []string{"5"}},
		{"SubmitTx past another writer", "WAL", "BEGIN IMMEDIATE",
			func(m *jobs.Manager, db *sql.DB, _ string) error {
				tx, err := db.BeginTx(ctx, nil) // deferred: it reads first
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var n int
				if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM intentjobs_jobs`).Scan(&n); err != nil {
					return err
				}
				_, _, err = m.SubmitTx(ctx, tx, jobs.SubmitRequest{Owner: "u", Key: "in-tx", Kind: "charge",
					Provider: "acme", Params: json.RawMessage(`{}`)})
				return err
			}, jobs.StorageConflict, []string{"5", "517"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := "file:" + filepath.Join(t.TempDir(), "jobs.db") +
				"?_pragma=busy_timeout(0)&_pragma=journal_mode(" + c.journal + ")&_pragma=foreign_keys(1)"
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s, err := jobs.NewSQLiteStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "acme",
				Params: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}

			other, err := sql.Open("sqlite", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			holder, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if _, err := holder.ExecContext(ctx, c.lock); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.ExecContext(ctx, `UPDATE intentjobs_jobs SET reason = 'held' WHERE id = ?`, j.ID); err != nil {
				t.Fatal(err)
			}
			err = c.call(m, db, j.ID)
			if _, rerr := holder.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				t.Fatal(rerr)
			}

			var se *jobs.StorageError
			if !errors.Is(err, jobs.ErrStorage) || !errors.As(err, &se) {
				t.Fatalf("err = %#v, want a *jobs.StorageError", err)
			}
			if se.Kind != c.kind || !slices.Contains(c.codes, se.Code) {
				t.Errorf("StorageError kind %q, code %q (%v); want kind %q, code one of %v", se.Kind, se.Code, se, c.kind, c.codes)
			}
			// Nothing was written, and the store works once the lock is gone.
			if got, err := m.Get(ctx, j.ID); err != nil || got.Reason != "" {
				t.Errorf("job after the refused call: reason %q, %v", got.Reason, err)
			}
			if _, err := m.GetByKey(ctx, "u", "in-tx"); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("job of the refused SubmitTx: %v, want ErrNotFound", err)
			}
		})
	}
}
