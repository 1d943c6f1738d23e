package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// pgxSetup is an application that uses pgx: one pgxpool for its own
// queries and for the store, which runs over stdlib.OpenDBFromPool, and a
// table of the application's own.
type pgxSetup struct {
	pool  *pgxpool.Pool
	store *jobs.PostgresStore
	m     *jobs.Manager
}

func newPgxSetup(t *testing.T) pgxSetup {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() {
		db.Close()
		pool.Close()
	})
	store, err := jobs.NewPostgresStore(ctx, db)
	if err != nil {
		t.Fatalf("NewPostgresStore over stdlib.OpenDBFromPool: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, job_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pgxSetup{pool: pool, store: store, m: jobstest.NewManager(t, store, jobs.Options{Logger: discard})}
}

// TestSubmitPgxTxCommitsWithTheCallersRows submits inside a pgx
// transaction beside a row of the application's: the job and the row are
// there after a commit, and neither after a rollback. A second submit in
// the same transaction finds the job.
func TestSubmitPgxTxCommitsWithTheCallersRows(t *testing.T) {
	t.Parallel()
	p := newPgxSetup(t)
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			ctx := context.Background()
			key := fmt.Sprintf("order-%v", commit)
			tx, err := p.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			j, created, err := p.m.SubmitPgxTx(ctx, tx, chargeReq("u", key))
			if err != nil || !created {
				t.Fatalf("SubmitPgxTx = %v, %v", created, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO orders (id, job_id) VALUES ($1, $2)`, key, j.ID); err != nil {
				t.Fatal(err)
			}
			again, created, err := p.m.SubmitPgxTx(ctx, tx, chargeReq("u", key))
			if err != nil || created || again.ID != j.ID {
				t.Fatalf("second SubmitPgxTx in the transaction = %s, %v, %v; want %s replayed", again.ID, created, err, j.ID)
			}
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}

			got, err := p.m.GetByKey(ctx, "u", key)
			var orders int
			if err := p.pool.QueryRow(ctx, `SELECT COUNT(*) FROM orders WHERE id = $1`, key).Scan(&orders); err != nil {
				t.Fatal(err)
			}
			switch {
			case commit && (err != nil || got.ID != j.ID || orders != 1):
				t.Errorf("after commit: job %s, %v, %d orders; want %s and 1 order", got.ID, err, orders, j.ID)
			case !commit && (!errors.Is(err, jobs.ErrNotFound) || orders != 0):
				t.Errorf("after rollback: job %s, %v, %d orders; want ErrNotFound and none", got.ID, err, orders)
			}
		})
	}
}

// TestSubmitPgxTxRace releases many pgx transactions at once, each
// submitting the same key and committing: all of them return one job,
// created by exactly one.
func TestSubmitPgxTxRace(t *testing.T) {
	t.Parallel()
	p := newPgxSetup(t)
	ctx := context.Background()
	const n = 8
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
				j, c, err := p.m.SubmitPgxTx(ctx, tx, chargeReq("u", "same"))
				ids[i], created[i] = j.ID, c
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("transaction %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("transaction %d got job %s, transaction 0 %s", i, ids[i], ids[0])
		}
		if created[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Errorf("%d transactions created the job, want 1", creators)
	}
	checkNoViolations(t, p.store)
}

// TestSubmitPgxTxRefusals: a nil transaction, bad input and a store that
// cannot join a pgx transaction are refused with their errors, and
// nothing is written.
func TestSubmitPgxTxRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPgxSetup(t)
	sqlite := jobstest.NewManager(t, testdb.NewSQLite(t), jobs.Options{Logger: discard})
	bad := chargeReq("u", "bad")
	bad.Params = json.RawMessage(`{"amount":`)
	cases := []struct {
		name    string
		m       *jobs.Manager
		req     jobs.SubmitRequest
		withTx  bool
		wantErr error
	}{
		{"nil tx", p.m, chargeReq("u", "nil-tx"), false, jobs.ErrInvalidInput},
		{"bad params", p.m, bad, true, jobs.ErrInvalidInput},
		{"sqlite store", sqlite, chargeReq("u", "sqlite"), true, errors.ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tx pgx.Tx
			if c.withTx {
				var err error
				if tx, err = p.pool.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(context.WithoutCancel(ctx))
			}
			if _, _, err := c.m.SubmitPgxTx(ctx, tx, c.req); !errors.Is(err, c.wantErr) {
				t.Fatalf("SubmitPgxTx: err = %v, want %v", err, c.wantErr)
			}
			if tx != nil {
				if err := tx.Commit(ctx); err != nil {
					t.Fatalf("the transaction cannot commit after the refusal: %v", err)
				}
			}
			if _, err := c.m.GetByKey(ctx, c.req.Owner, c.req.Key); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("GetByKey after the refusal: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestPostgresStoreOverPgxPool runs a job through a store over
// stdlib.OpenDBFromPool, sharing the application's pgxpool: the store's
// listening connection, set up like the pool's, hears the job close.
func TestPostgresStoreOverPgxPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPgxSetup(t)
	j := submitOK(t, p.m, chargeReq("u", "k"))
	wake, stop, err := p.store.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatalf("NotifyClosed: %v", err)
	}
	defer stop()
	runToSuccess(t, p.m, j)
	<-wake // no timeout of its own: a job whose close is never heard hangs until go test's -timeout
	if got, err := p.m.Wait(ctx, j.ID); err != nil || got.State != jobs.JobSucceeded {
		t.Errorf("Wait = %s, %v; want succeeded", got.State, err)
	}
}
