package linearcheck_test

import (
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/memstore"
)

// The concurrent workloads, recorded on each store, with and without
// ambiguous faults: all must be linearizable.

// faulty wraps inner in a faultstore whose write faults are half before
// the write, half after it (the caller sees a timeout either way).
func faulty(inner jobs.Store, seed uint64) *faultstore.Store {
	return faultstore.New(inner, faultstore.Config{Seed: seed, Rate: 0.05, AfterShare: 0.5})
}

var standard = workload{workers: 8, rounds: 18, keys: 2, reconcilers: 2, purge: true}

func TestMemstore(t *testing.T) {
	t.Parallel()
	r := newRun(t, memstore.New())
	w := standard
	w.seed = 1
	w.drive(t, r)
	r.mustBeLinearizable()
}

func TestMemstoreFaults(t *testing.T) {
	t.Parallel()
	fs := faulty(memstore.New(), 2)
	r := newRun(t, fs)
	w := standard
	w.seed, w.quiet = 2, func() { fs.SetEnabled(false) }
	w.drive(t, r)
	res := r.mustBeLinearizable()
	if res.Ambiguous == 0 {
		t.Error("no ambiguous operation: the faults proved nothing")
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewSQLite(t))
	w := standard
	w.seed = 3
	w.drive(t, r)
	r.mustBeLinearizable()
}

func TestSQLiteFaults(t *testing.T) {
	t.Parallel()
	fs := faulty(testdb.NewSQLite(t), 4)
	r := newRun(t, fs)
	w := standard
	w.seed, w.quiet = 4, func() { fs.SetEnabled(false) }
	w.drive(t, r)
	res := r.mustBeLinearizable()
	if res.Ambiguous == 0 {
		t.Error("no ambiguous operation: the faults proved nothing")
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewPostgres(t))
	w := standard
	w.seed = 5
	w.drive(t, r)
	r.mustBeLinearizable()
}

func TestPostgresFaults(t *testing.T) {
	t.Parallel()
	fs := faulty(testdb.NewPostgres(t), 6)
	r := newRun(t, fs)
	w := standard
	w.seed, w.quiet = 6, func() { fs.SetEnabled(false) }
	w.drive(t, r)
	res := r.mustBeLinearizable()
	if res.Ambiguous == 0 {
		t.Error("no ambiguous operation: the faults proved nothing")
	}
}
