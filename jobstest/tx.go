package jobstest

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs"
)

// testSubmitTx proves TxStore.CreateJobTx through Manager.SubmitTx: a job
// submitted in the caller's transaction exists if it commits and not if it
// rolls back, and a policy of key reuse is refused there, writing nothing.
// The suite opens the transactions on the store's DB() *sql.DB, as the SQL
// stores have. A store that is no TxStore must refuse SubmitTx with an
// error matching errors.ErrUnsupported, and write nothing.
func testSubmitTx(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	if _, ok := e.store.(jobs.TxStore); !ok {
		// A store that cannot write in a caller's transaction must say
		// so, and write nothing.
		_, _, err := e.m.SubmitTx(e.ctx, nil, req("owner-1", "tx"))
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("SubmitTx on %T, which is no jobs.TxStore: %v, want errors.ErrUnsupported", e.store, err)
		}
		if n := e.countJobs(); n != 0 {
			t.Fatalf("an unsupported SubmitTx left %d jobs", n)
		}
		return
	}
	s, ok := e.raw.(interface{ DB() *sql.DB })
	if !ok {
		t.Skipf("a %T is a jobs.TxStore without a method DB() *sql.DB: the suite cannot open a transaction on its database", e.raw)
	}
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			e := e.with(t)
			key := fmt.Sprintf("tx-%v", commit)
			tx, err := s.DB().BeginTx(e.ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			j, created, err := e.m.SubmitTx(e.ctx, tx, req("owner-1", key))
			if err != nil || !created {
				tx.Rollback()
				t.Fatalf("SubmitTx = %v, %v", created, err)
			}
			again, created, err := e.m.SubmitTx(e.ctx, tx, req("owner-1", key))
			if err != nil || created || again.ID != j.ID {
				tx.Rollback()
				t.Fatalf("second SubmitTx in the same transaction = %s, %v, %v", again.ID, created, err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.m.GetByKey(e.ctx, "owner-1", key)
			switch {
			case commit && (err != nil || got.ID != j.ID):
				t.Errorf("after commit: GetByKey = %s, %v; want %s", got.ID, err, j.ID)
			case !commit && !errors.Is(err, jobs.ErrNotFound):
				t.Errorf("after rollback: GetByKey = %s, %v; want ErrNotFound", got.ID, err)
			}
		})
	}

	t.Run("key reuse refused", func(t *testing.T) {
		// A key is reused by Submit alone: in a transaction of the
		// caller's, a policy is bad input, and the transaction commits
		// having written nothing.
		e := e.with(t)
		e.jobIn("failed", jobs.JobFailed)
		before := e.snapshot()
		tx, err := s.DB().BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, r := range []jobs.SubmitRequest{
			reuseReq("new", jobs.KeyReuseAfterFailure),
			reuseReq("failed", jobs.KeyReuseAfterFailureOrCancel),
		} {
			var ie *jobs.InputError
			if _, _, err := e.m.SubmitTx(e.ctx, tx, r); !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "Reuse" {
				t.Errorf("SubmitTx of key %q with %s = %v; want an *InputError for Reuse", r.Key, r.Reuse, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		e.unchanged(before, "refused submits in a transaction")
	})
}
