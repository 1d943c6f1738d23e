package jobstest

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/intentjobs/jobs"
)

func testSubmitTx(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	s, ok := e.store.(interface{ DB() *sql.DB })
	if !ok {
		// A store without a database of the caller's cannot join a
		// caller's transaction: it must say so, and write nothing.
		_, _, err := e.m.SubmitTx(e.ctx, nil, req("owner-1", "tx"))
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("SubmitTx on %T, which has no DB(): %v, want errors.ErrUnsupported", e.store, err)
		}
		if n := e.countJobs(); n != 0 {
			t.Fatalf("an unsupported SubmitTx left %d jobs", n)
		}
		return
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
}
