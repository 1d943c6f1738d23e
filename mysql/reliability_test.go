package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/mysql"
)

// size is full when JOBS_TEST_LONG is 1 (as in CI), quick otherwise.
func size(full, quick int) int {
	if os.Getenv("JOBS_TEST_LONG") == "1" {
		return full
	}
	return quick
}

// Many goroutines, through several handles on one database (as several
// processes would hold), released at once on one key: one job, every
// caller its ID. Then as many hedged attempts complete at once: one
// winner, every loser told who won.
func TestOneKeyManyCallers(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	var stores []*mysql.Store
	var managers []*jobs.Manager
	for range 4 {
		s := openStoreAt(t, dsn)
		stores = append(stores, s)
		m, _ := newManager(t, s)
		managers = append(managers, m)
	}
	ctx := t.Context()
	const callers = 48
	for round := range size(20, 4) {
		key := fmt.Sprintf("key-%d", round)
		ids := make([]string, callers)
		created := make([]bool, callers)
		errs := make([]error, callers)
		release(callers, func(i int) {
			j, c, err := managers[i%len(managers)].Submit(ctx, charge("owner-1", key))
			ids[i], created[i], errs[i] = j.ID, c, err
		})
		n := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("round %d, caller %d: %v", round, i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: callers got jobs %s and %s", round, ids[0], ids[i])
			}
			if created[i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d callers created the job; want 1", round, n)
		}

		// Hedged attempts, each running, then completing all at once.
		const hedges = 12
		var atts []jobs.Attempt
		for i := range hedges {
			a, err := managers[i%len(managers)].StartAttempt(ctx, ids[0], "", jobs.Hedge())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := managers[i%len(managers)].MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil {
				t.Fatal(err)
			}
			atts = append(atts, a)
		}
		won := make([]bool, hedges)
		winners := make([]string, hedges)
		release(hedges, func(i int) {
			_, err := managers[i%len(managers)].Complete(ctx, atts[i].ID, json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)))
			var lost *jobs.LostRaceError
			switch {
			case err == nil:
				won[i], winners[i] = true, atts[i].ID
			case errors.As(err, &lost):
				winners[i] = lost.WinnerID
			default:
				t.Errorf("Complete %d: %v", i, err)
			}
		})
		j, err := managers[0].Get(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		w := 0
		for i := range hedges {
			if won[i] {
				w++
			}
			if winners[i] != j.CompletedBy {
				t.Errorf("round %d: attempt %s was told %q won; the job says %s", round, atts[i].ID, winners[i], j.CompletedBy)
			}
		}
		if w != 1 || j.State != jobs.JobSucceeded {
			t.Fatalf("round %d: %d winners, job %s; want one winner", round, w, j.State)
		}
	}
	checkInvariants(t, stores[0])
}

func checkInvariants(t testing.TB, s *mysql.Store) {
	t.Helper()
	vs, err := invariant.Check(context.WithoutCancel(t.Context()), s)
	if err != nil {
		t.Fatalf("invariant.Check: %v", err)
	}
	for _, v := range vs {
		t.Errorf("invariant violated: %s", v)
	}
}

// typedStorageError fails the test unless err is nil, one of package jobs'
// answers, or a *jobs.StorageError, with no driver error reachable.
func typedError(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var me *gomysql.MySQLError
	var ne net.Error
	if errors.As(err, &me) || (errors.As(err, &ne) && !errors.Is(err, context.DeadlineExceeded)) || errors.Is(err, gomysql.ErrInvalidConn) {
		t.Errorf("%s: the driver's error reached the caller: %#v", what, err)
		return
	}
	for _, target := range []error{jobs.ErrStorage, jobs.ErrNotFound, jobs.ErrKeyConflict, jobs.ErrAttemptInFlight,
		jobs.ErrLostRace, jobs.ErrInvalidTransition, jobs.ErrJobClosed, jobs.ErrInvalidInput} {
		if errors.Is(err, target) {
			return
		}
	}
	t.Errorf("%s: an untyped error: %#v", what, err)
}

// intent carries one intent through Submit, StartAttempt, MarkRunning and
// Complete, trying each step again after an error of the database, as a
// client that never got its answer would: every retry must reach the same
// job, and a step that took effect before its answer was lost must be
// recognised, never done twice.
type intent struct {
	m        func() *jobs.Manager // the manager of the next try
	key      string
	jobID    string
	attempt  string
	failures map[string]int // typed storage failures by operation and kind
}

// run returns the job's final state; it fails the test on any answer that
// is neither a success nor a typed error that a retry resolves.
func (in *intent) run(t testing.TB, ctx context.Context, tries int) (jobs.Job, error) {
	t.Helper()
	step := func(op string, fn func(m *jobs.Manager) (done bool, err error)) error {
		for range tries {
			done, err := fn(in.m())
			typedError(t, op, err)
			if done {
				return nil
			}
			var se *jobs.StorageError
			if !errors.As(err, &se) {
				return fmt.Errorf("%s: %w", op, err)
			}
			in.failures[op+"/"+string(se.Kind)]++
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(2 * time.Millisecond)
		}
		return fmt.Errorf("%s: still failing after %d tries", op, tries)
	}
	if err := step("submit", func(m *jobs.Manager) (bool, error) {
		j, _, err := m.Submit(ctx, charge("owner-1", in.key))
		if err == nil {
			if in.jobID != "" && j.ID != in.jobID {
				t.Errorf("key %s: a retry reached job %s, an earlier answer %s", in.key, j.ID, in.jobID)
			}
			in.jobID = j.ID
		}
		return err == nil, err
	}); err != nil {
		return jobs.Job{}, err
	}
	if err := step("start attempt", func(m *jobs.Manager) (bool, error) {
		a, err := m.StartAttempt(ctx, in.jobID, "")
		var busy *jobs.AttemptInFlightError
		switch {
		case err == nil:
			in.attempt = a.ID
			return true, nil
		case errors.As(err, &busy):
			// An earlier try took effect before its answer was lost.
			in.attempt = busy.AttemptID
			return true, nil
		}
		return false, err
	}); err != nil {
		return jobs.Job{}, err
	}
	if err := step("mark running", func(m *jobs.Manager) (bool, error) {
		_, err := m.MarkRunning(ctx, in.attempt, "ref-"+in.attempt)
		if errors.Is(err, jobs.ErrInvalidTransition) {
			a, rerr := m.Attempt(ctx, in.attempt)
			if rerr == nil && a.State == jobs.AttemptRunning && a.ProviderRef == "ref-"+in.attempt {
				return true, nil // an earlier try took effect
			}
		}
		return err == nil, err
	}); err != nil {
		return jobs.Job{}, err
	}
	var out jobs.Job
	err := step("complete", func(m *jobs.Manager) (bool, error) {
		j, err := m.Complete(ctx, in.attempt, json.RawMessage(`{"ok":true}`))
		out = j
		return err == nil, err
	})
	return out, err
}

// Connections killed (KILL CONNECTION) over and over while many intents
// are carried out: every error is typed, every retry reaches the same job,
// and every job ends succeeded by the attempt its caller started, once.
func TestKilledConnectionsUnderLoad(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	s := openStoreAt(t, dsn)
	m, _ := newManager(t, s)
	admin := adminDB(t, dsn)
	name := dbName(t, dsn)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	const workers = 8
	perWorker := size(40, 12)
	stop := make(chan struct{})
	var kills atomic.Int64
	var killer sync.WaitGroup
	killer.Add(1)
	go func() {
		defer killer.Done()
		for range 400 { // bounded
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			kills.Add(killSessions(t, admin, name))
		}
	}()
	results := make([][]*intent, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				in := &intent{m: func() *jobs.Manager { return m }, key: fmt.Sprintf("k-%d-%d", w, i), failures: map[string]int{}}
				j, err := in.run(t, ctx, 200)
				if err != nil {
					t.Errorf("intent %s: %v", in.key, err)
					return
				}
				if j.State != jobs.JobSucceeded || j.CompletedBy != in.attempt {
					t.Errorf("intent %s: job %s %s by %s; want succeeded by %s", in.key, j.ID, j.State, j.CompletedBy, in.attempt)
				}
				results[w] = append(results[w], in)
			}
		}()
	}
	wg.Wait()
	close(stop)
	killer.Wait()

	failures := map[string]int{}
	n := 0
	for _, rs := range results {
		for _, in := range rs {
			n++
			for k, v := range in.failures {
				failures[k] += v
			}
			got, err := m.GetByKey(ctx, "owner-1", in.key)
			if err != nil || got.ID != in.jobID {
				t.Errorf("key %s: %s, %v; want job %s", in.key, got.ID, err, in.jobID)
			}
			if as, err := m.Attempts(ctx, in.jobID); err != nil || len(as) != 1 {
				t.Errorf("job %s: %d attempts, %v; want 1", in.jobID, len(as), err)
			}
		}
	}
	if n != workers*perWorker {
		t.Fatalf("%d intents done; want %d", n, workers*perWorker)
	}
	t.Logf("%d intents, %d connections killed, typed failures retried by the callers: %v", n, kills.Load(), failures)
	checkInvariants(t, s)
}

// killSessions kills every connection to the database name but db's own,
// and reports how many.
func killSessions(t testing.TB, db *sql.DB, name string) int64 {
	rows, err := db.Query(`SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`, name)
	if err != nil {
		return 0
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	var n int64
	for _, id := range ids {
		// Kill only a few at a time, so that work gets done in between.
		if n == 3 {
			break
		}
		if _, err := db.Exec("KILL CONNECTION " + strconv.FormatInt(id, 10)); err == nil {
			n++
		}
	}
	return n
}
