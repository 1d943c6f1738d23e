package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// The constructors over a caller's *sqlx.DB, and SubmitTx inside an *sqlx.Tx.
func TestCallerHandles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (*sqlx.DB, func(context.Context, *sqlx.DB) (jobs.SQLStore, error))
	}{
		{"sqlite", func(t *testing.T) (*sqlx.DB, func(context.Context, *sqlx.DB) (jobs.SQLStore, error)) {
			db, err := sqlx.Open("sqlite3", filepath.Join(t.TempDir(), "app.db")+"?_busy_timeout=5000&_journal_mode=WAL")
			if err != nil {
				t.Fatal(err)
			}
			return db, func(ctx context.Context, db *sqlx.DB) (jobs.SQLStore, error) {
				return jobs.NewSQLiteStoreSQLX(ctx, db)
			}
		}},
		{"postgres", func(t *testing.T) (*sqlx.DB, func(context.Context, *sqlx.DB) (jobs.SQLStore, error)) {
			db, err := sqlx.Open("pgx", testdb.PostgresDSN(t))
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(4)
			return db, func(ctx context.Context, db *sqlx.DB) (jobs.SQLStore, error) {
				return jobs.NewPostgresStoreSQLX(ctx, db)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, newStore := tc.open(t)
			defer db.Close()
			store, err := newStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			store.Close() // leaves the caller's handle open
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("Close closed the caller's handle: %v", err)
			}
			if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id text PRIMARY KEY, job_id text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			m := jobstest.NewManager(t, store, jobs.Options{Logger: discard})
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			j, created, err := m.SubmitTx(ctx, tx, jobs.SubmitRequest{Owner: "o", Key: "order-1", Kind: "charge", Provider: "p", Params: json.RawMessage(`{}`)})
			if err != nil || !created {
				t.Fatalf("SubmitTx = %v, %v", created, err)
			}
			if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO orders (id, job_id) VALUES (?, ?)`), "order-1", j.ID); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			var jobID string
			if err := db.GetContext(ctx, &jobID, db.Rebind(`SELECT job_id FROM orders WHERE id = ?`), "order-1"); err != nil || jobID != j.ID {
				t.Fatalf("order row = %q, %v; want job %s", jobID, err, j.ID)
			}
			if got, err := m.Get(ctx, j.ID); err != nil || got.Key != "order-1" {
				t.Fatalf("Get = %+v, %v", got, err)
			}
		})
	}
}

// A lost race is logged through the caller's logger, with both attempts.
func TestLostRaceIsLogged(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	m := jobstest.NewManager(t, testdb.NewSQLite(t), jobs.Options{Logger: logger, Hedging: true})
	ctx := t.Context()
	j, _, _ := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
	a, _ := m.StartAttempt(ctx, j.ID, "")
	m.MarkRunning(ctx, a.ID, "r")
	b, _ := m.StartAttempt(ctx, j.ID, "")
	if _, err := m.Complete(ctx, b.ID, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a winning Complete logged: %s", buf.String())
	}
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`2`)); !errors.Is(err, jobs.ErrLostRace) {
		t.Fatalf("Complete = %v, want ErrLostRace", err)
	}
	out := buf.String()
	for _, want := range []string{"level=WARN", "late result dropped", "attempt_id=" + a.ID, "winner_id=" + b.ID, "job_id=" + j.ID} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}
