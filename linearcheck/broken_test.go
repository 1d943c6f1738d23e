package linearcheck_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/linearcheck"
	"github.com/intentjobs/jobs/memstore"
)

// Stores broken on purpose, in the ways that matter, and histories of
// them that the checker must find not linearizable, with a trace that
// says why. Each broken store wraps a real one and changes one method;
// the recorder wraps the broken store, so that the history sees it from
// outside, as it would see a buggy engine.

// twoWinners completes a job twice: a CompleteAttempt that lost the
// compare-and-swap writes its result anyway, without the version check,
// and reports success.
type twoWinners struct {
	testdb.Store
	db *sql.DB
}

func (s twoWinners) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	j, a, err := s.Store.CompleteAttempt(ctx, c)
	var lost *jobs.LostRaceError
	if !errors.As(err, &lost) {
		return j, a, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE intentjobs_jobs SET result = ?, completed_by = ?, version = version + 1 WHERE id = ?`,
		string(c.Result), c.AttemptID, j.ID); err != nil {
		return j, a, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE intentjobs_attempts SET state = 'succeeded', reason = '' WHERE id = ?`, c.AttemptID); err != nil {
		return j, a, err
	}
	j, _ = s.Store.Job(ctx, j.ID)
	a, _ = s.Store.Attempt(ctx, c.AttemptID)
	return j, a, nil
}

// lostWrite acknowledges a completion and then loses it, as a failover to
// a replica that never received the commit would: the job and the
// attempt are back as they were.
type lostWrite struct {
	testdb.Store
	db *sql.DB
}

func (s lostWrite) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	before, err := s.Store.Attempt(ctx, c.AttemptID)
	if err != nil {
		return jobs.Job{}, jobs.Attempt{}, err
	}
	j, a, err := s.Store.CompleteAttempt(ctx, c)
	if err != nil {
		return j, a, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE intentjobs_jobs SET state = 'running', result = NULL, completed_by = NULL,
		version = version - 1, closed_at = NULL WHERE id = ?`, j.ID); err != nil {
		return j, a, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE intentjobs_attempts SET state = ?, finished_at = NULL WHERE id = ?`,
		string(before.State), c.AttemptID); err != nil {
		return j, a, err
	}
	return j, a, nil
}

// keyFreed takes a key from a job while one of its attempts is in doubt:
// the guard of ReplaceJob is ignored (as a check-then-write that read the
// attempts before they moved would), and the new job is created.
type keyFreed struct {
	testdb.Store
	db *sql.DB
}

func (s keyFreed) ReplaceJob(ctx context.Context, r jobs.JobReplacement) (jobs.Job, bool, error) {
	j, created, err := s.Store.ReplaceJob(ctx, r)
	var inFlight *jobs.AttemptInFlightError
	if !errors.As(err, &inFlight) {
		return j, created, err
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE intentjobs_jobs SET idempotency_key = ? WHERE id = ?`,
		jobs.RetiredKey(r.New.Key, r.New.ID), r.OldID); err != nil {
		return j, created, err
	}
	return s.Store.CreateJob(ctx, r.New)
}

// staleReads serves Job from a cache filled by the first read of each
// job, which no write invalidates.
type staleReads struct {
	testdb.Store
	mu    sync.Mutex
	cache map[string]jobs.Job
}

func (s *staleReads) Job(ctx context.Context, id string) (jobs.Job, error) {
	s.mu.Lock()
	j, ok := s.cache[id]
	s.mu.Unlock()
	if ok {
		return j, nil
	}
	j, err := s.Store.Job(ctx, id)
	if err == nil {
		s.mu.Lock()
		s.cache[id] = j
		s.mu.Unlock()
	}
	return j, err
}

// doubleClaim grants a claim that another reconciler's lease still
// holds: a ClaimAttempt that finds the attempt claimed takes it anyway.
type doubleClaim struct {
	testdb.Store
	db *sql.DB
}

func (s doubleClaim) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	a, ok, err := s.Store.ClaimAttempt(ctx, c)
	if ok || err != nil {
		return a, ok, err
	}
	n, err := s.db.ExecContext(ctx, `UPDATE intentjobs_attempts SET claim_token = ?, claimed_until = ? WHERE id = ? AND state = ?
		AND state IN ('starting', 'running', 'unknown')`, c.Token, c.Until.UnixMicro(), c.ID, string(c.State))
	if err != nil {
		return a, false, err
	}
	if rows, _ := n.RowsAffected(); rows == 0 {
		return a, false, nil
	}
	a, err = s.Store.Attempt(ctx, c.ID)
	return a, err == nil, err
}

// mustViolate fails the test unless res found the history not
// linearizable with a trace that contains each of want. It logs the
// report, and writes the visualization next to the history.
func mustViolate(t *testing.T, r *run, res linearcheck.Result, want ...string) {
	t.Helper()
	if res.Ok() || len(res.Violations) == 0 {
		t.Fatalf("the broken store was not caught: %s", res.Summary())
	}
	t.Logf("the report:\n%s", res.Report())
	path := filepath.Join(r.dir, "linearizability.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := res.Visualize(f); err != nil {
		t.Fatalf("visualize: %v", err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() < 1000 {
		t.Errorf("visualization at %s is empty", path)
	}
	trace := res.Violations[0].Trace
	for _, w := range want {
		if !strings.Contains(trace, w) {
			t.Errorf("the trace does not say %q", w)
		}
	}
	if !strings.Contains(trace, "longest linearizable prefix") && !strings.Contains(trace, "no operation can come first") {
		t.Error("the trace has no linearizable prefix")
	}
}

func submit(t *testing.T, m *jobs.Manager, key string, reuse jobs.KeyReuse) jobs.Job {
	t.Helper()
	j, _, err := m.Submit(context.Background(), jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p",
		Params: json.RawMessage(`{"amount":1}`), Reuse: reuse})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func running(t *testing.T, m *jobs.Manager, jobID string, opts ...jobs.AttemptOption) jobs.Attempt {
	t.Helper()
	ctx := context.Background()
	a, err := m.StartAttempt(ctx, jobID, "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if a, err = m.MarkRunning(ctx, a.ID, "ref-"+a.ID[len(a.ID)-6:]); err != nil {
		t.Fatal(err)
	}
	return a
}

// raceCompletes races the Completes of two running attempts (the second a
// hedge) of each of n jobs, then reads the jobs.
func raceCompletes(t *testing.T, r *run, n int) {
	ctx := context.Background()
	setup := r.manager("setup", options)
	racers := []*jobs.Manager{r.manager("racer-0", options), r.manager("racer-1", options)}
	for i := range n {
		j := submit(t, setup, fmt.Sprintf("race-%d", i), jobs.KeyReuseNever)
		as := []jobs.Attempt{running(t, setup, j.ID), running(t, setup, j.ID, jobs.Hedge())}
		release(2, func(k int) {
			racers[k].Complete(ctx, as[k].ID, json.RawMessage(fmt.Sprintf(`{"by":%d}`, k)))
		})
		setup.Get(ctx, j.ID)
	}
}

func TestBrokenTwoWinners(t *testing.T) {
	t.Parallel()
	sq := testdb.NewSQLite(t)
	r := newRun(t, twoWinners{sq, sq.DB()})
	raceCompletes(t, r, 6)
	mustViolate(t, r, r.check(), "ErrLostRace", "CompleteAttempt")
}

// The same race on the store as it is: linearizable.
func TestRacingCompletes(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewSQLite(t))
	raceCompletes(t, r, 6)
	r.mustBeLinearizable()
}

func TestBrokenLostWrite(t *testing.T) {
	t.Parallel()
	sq := testdb.NewSQLite(t)
	r := newRun(t, lostWrite{sq, sq.DB()})
	ctx := context.Background()
	m := r.manager("runner", options)
	reader := r.manager("reader", options)
	for i := range 3 {
		j := submit(t, m, fmt.Sprintf("lost-%d", i), jobs.KeyReuseNever)
		a := running(t, m, j.ID)
		if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{"paid":true}`)); err != nil {
			t.Fatal(err)
		}
		reader.Get(ctx, j.ID)
	}
	mustViolate(t, r, r.check(), "State running; want succeeded")
}

// freeKeyInDoubt cancels jobs whose attempt is in doubt and submits their
// intent again with key reuse: on n jobs one after the other, and on n
// more racing the attempt's late result.
func freeKeyInDoubt(t *testing.T, r *run, n int) {
	ctx := context.Background()
	m := r.manager("operator", options)
	racers := []*jobs.Manager{r.manager("client", options), r.manager("runner", options)}
	for i := range 2 * n {
		key := fmt.Sprintf("reuse-%d", i)
		j := submit(t, m, key, jobs.KeyReuseNever)
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.MarkUnknown(ctx, a.ID, "timeout"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.CancelJob(ctx, j.ID, "operator"); err != nil {
			t.Fatal(err)
		}
		resubmit := func() {
			racers[0].Submit(ctx, jobs.SubmitRequest{Owner: "tenant", Key: key, Kind: "charge", Provider: "p",
				Params: json.RawMessage(`{"amount":1}`), Reuse: jobs.KeyReuseAfterFailureOrCancel})
		}
		if i < n {
			resubmit()
			continue
		}
		release(2, func(k int) {
			if k == 0 {
				resubmit()
			} else {
				racers[1].Complete(ctx, a.ID, json.RawMessage(`{"late":true}`))
			}
		})
	}
}

func TestBrokenKeyFreedInDoubt(t *testing.T) {
	t.Parallel()
	sq := testdb.NewSQLite(t)
	r := newRun(t, keyFreed{sq, sq.DB()})
	freeKeyInDoubt(t, r, 3)
	mustViolate(t, r, r.check(), "ErrAttemptInFlight", "ReplaceJob")
}

// The same on the store as it is: linearizable.
func TestKeyReuseInDoubt(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewSQLite(t))
	freeKeyInDoubt(t, r, 3)
	r.mustBeLinearizable()
}

func TestBrokenStaleRead(t *testing.T) {
	t.Parallel()
	r := newRun(t, &staleReads{Store: memstore.New(), cache: map[string]jobs.Job{}})
	ctx := context.Background()
	m := r.manager("caller", options)
	j := submit(t, m, "stale", jobs.KeyReuseNever)
	if _, err := m.Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	a := running(t, m, j.ID)
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	mustViolate(t, r, r.check(), "Job(", "State pending; want succeeded")
}

func TestBrokenDoubleClaim(t *testing.T) {
	t.Parallel()
	sq := testdb.NewSQLite(t)
	r := newRun(t, doubleClaim{sq, sq.DB()})
	raceClaims(t, r, 4)
	mustViolate(t, r, r.check(), "ClaimAttempt", "claimed = true; want false")
}

// purgeInDoubt purges closed jobs whatever their attempts, as a purge
// without the guard on open attempts would: the key of a job cancelled
// while its attempt is in doubt is freed, and a new job takes it while
// the old attempt may still act (the model's BROKEN_PURGE).
type purgeInDoubt struct {
	testdb.Store
	db *sql.DB
}

func (s purgeInDoubt) PurgeJobs(ctx context.Context, q jobs.PurgeQuery) (jobs.PurgeCount, error) {
	if q.DryRun || q.Limit == 0 {
		return s.Store.PurgeJobs(ctx, q)
	}
	var n jobs.PurgeCount
	before := q.Before.UnixMicro()
	res, err := s.db.ExecContext(ctx, `DELETE FROM intentjobs_attempts WHERE job_id IN
		(SELECT id FROM intentjobs_jobs WHERE closed_at IS NOT NULL AND closed_at < ?1 AND created_at < ?1)`, before)
	if err != nil {
		return n, err
	}
	n.Attempts, _ = res.RowsAffected()
	if res, err = s.db.ExecContext(ctx, `DELETE FROM intentjobs_jobs WHERE closed_at IS NOT NULL AND closed_at < ?1 AND created_at < ?1`, before); err != nil {
		return n, err
	}
	n.Jobs, _ = res.RowsAffected()
	return n, nil
}

// purgeKeyInDoubt cancels n jobs whose attempt is in doubt, purges with a
// cutoff after all of them, and then races, on each key, a Submit of the
// same intent with the old attempt's late result.
func purgeKeyInDoubt(t *testing.T, r *run, n int) {
	ctx := context.Background()
	m := r.manager("operator", options)
	racers := []*jobs.Manager{r.manager("client", options), r.manager("runner", options)}
	var keys []string
	var doubtful []jobs.Attempt
	for i := range n {
		key := fmt.Sprintf("purged-%d", i)
		j := submit(t, m, key, jobs.KeyReuseNever)
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.MarkUnknown(ctx, a.ID, "timeout"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.CancelJob(ctx, j.ID, "operator"); err != nil {
			t.Fatal(err)
		}
		keys, doubtful = append(keys, key), append(doubtful, a)
	}
	if _, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i, key := range keys {
		release(2, func(k int) {
			if k == 0 {
				submit(t, racers[0], key, jobs.KeyReuseNever)
			} else {
				racers[1].Complete(ctx, doubtful[i].ID, json.RawMessage(`{"late":true}`))
			}
		})
	}
}

func TestBrokenPurgeInDoubt(t *testing.T) {
	t.Parallel()
	sq := testdb.NewSQLite(t)
	r := newRun(t, purgeInDoubt{sq, sq.DB()})
	purgeKeyInDoubt(t, r, 3)
	mustViolate(t, r, r.check(), "CreateJob", "PurgeJobs")
}

// The same on the store as it is: the purge keeps the jobs in doubt, and
// the Submits find them. Linearizable.
func TestPurgeKeepsJobsInDoubt(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewSQLite(t))
	purgeKeyInDoubt(t, r, 3)
	r.mustBeLinearizable()
}
