package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
)

// opsStores are the stores every test here runs on.
var opsStores = []struct {
	name string
	open func(t testing.TB) jobs.SQLStore
}{
	{"sqlite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
	{"postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
}

// eventRecorder records events, safe for concurrent use.
type eventRecorder struct {
	mu     sync.Mutex
	events []jobs.Event
}

func (l *eventRecorder) Observe(_ context.Context, e jobs.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventRecorder) ofType(typ jobs.EventType) []jobs.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []jobs.Event
	for _, e := range l.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func chargeReq(owner, key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{"amount":1200}`)}
}

// mustJob submits and fails the test on error.
func submitOK(t testing.TB, m *jobs.Manager, r jobs.SubmitRequest) jobs.Job {
	t.Helper()
	j, _, err := m.Submit(context.Background(), r)
	if err != nil {
		t.Fatalf("submit %s: %v", r.Key, err)
	}
	return j
}

// succeed runs one attempt of j to success.
func runToSuccess(t testing.TB, m *jobs.Manager, j jobs.Job) jobs.Attempt {
	t.Helper()
	ctx := context.Background()
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatalf("start attempt: %v", err)
	}
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	return a
}

// exists reports whether the job is still stored.
func jobExists(t testing.TB, s testdb.Store, id string) bool {
	t.Helper()
	_, err := s.Job(context.Background(), id)
	if errors.Is(err, jobs.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return true
}

func TestPurgeKeepsWhatIsNotExpired(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sc.open(t)
			clk := jobstest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			log := &eventRecorder{}
			m, err := jobs.New(s, jobs.Options{Clock: clk, Observer: log})
			if err != nil {
				t.Fatal(err)
			}

			// Old jobs, 48 hours before the purge.
			succeeded := submitOK(t, m, chargeReq("u", "succeeded"))
			runToSuccess(t, m, succeeded)
			failed := submitOK(t, m, chargeReq("u", "failed"))
			fa, _ := m.StartAttempt(ctx, failed.ID, "")
			m.Fail(ctx, fa.ID, "declined")
			if _, err := m.FailJob(ctx, failed.ID, "gave up"); err != nil {
				t.Fatal(err)
			}
			cancelledIdle := submitOK(t, m, chargeReq("u", "cancelled-idle"))
			if _, err := m.CancelJob(ctx, cancelledIdle.ID, "user"); err != nil {
				t.Fatal(err)
			}
			// Cancelled while an attempt is unknown: the provider may still
			// deliver, so the attempt's truth must stay recordable.
			cancelledOpen := submitOK(t, m, chargeReq("u", "cancelled-open"))
			oa, _ := m.StartAttempt(ctx, cancelledOpen.ID, "")
			m.MarkUnknown(ctx, oa.ID, "timeout")
			if _, err := m.CancelJob(ctx, cancelledOpen.ID, "user"); err != nil {
				t.Fatal(err)
			}
			pending := submitOK(t, m, chargeReq("u", "pending"))
			running := submitOK(t, m, chargeReq("u", "running"))
			ra, _ := m.StartAttempt(ctx, running.ID, "")
			m.MarkRunning(ctx, ra.ID, "ref-1")

			clk.Advance(47 * time.Hour)
			// Recent: closed one hour before the purge.
			recent := submitOK(t, m, chargeReq("u", "recent"))
			runToSuccess(t, m, recent)
			clk.Advance(time.Hour)

			dry, err := m.Purge(ctx, jobs.PurgeOptions{DryRun: true})
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if dry.Jobs != 3 || dry.Attempts != 2 || !dry.DryRun || dry.Batches != 0 {
				t.Errorf("dry run = %+v, want 3 jobs and 2 attempts", dry)
			}
			if !jobExists(t, s, succeeded.ID) {
				t.Fatal("dry run deleted a job")
			}

			res, err := m.Purge(ctx, jobs.PurgeOptions{BatchSize: 2})
			if err != nil {
				t.Fatalf("purge: %v", err)
			}
			if res.Jobs != 3 || res.Attempts != 2 {
				t.Errorf("purge = %+v, want 3 jobs and 2 attempts", res)
			}
			if res.Batches != 2 {
				t.Errorf("batches = %d, want 2 (a full batch of 2, then a short one)", res.Batches)
			}
			if want := clk.Now().Add(-jobs.DefaultRetention); !res.Cutoff.Equal(want) {
				t.Errorf("cutoff = %v, want %v", res.Cutoff, want)
			}
			for _, id := range []string{succeeded.ID, failed.ID, cancelledIdle.ID} {
				if jobExists(t, s, id) {
					t.Errorf("job %s survived the purge", id)
				}
			}
			for _, id := range []string{cancelledOpen.ID, pending.ID, running.ID, recent.ID} {
				if !jobExists(t, s, id) {
					t.Errorf("job %s was purged", id)
				}
			}
			if _, err := m.Attempt(ctx, fa.ID); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("attempt of a purged job: err = %v, want ErrNotFound", err)
			}
			if _, err := m.Attempt(ctx, oa.ID); err != nil {
				t.Errorf("open attempt of a kept job: %v", err)
			}
			ev := log.ofType(jobs.EventPurged)
			if len(ev) != 1 || ev[0].Count != 3 || ev[0].Attempts != 2 || ev[0].Duration <= 0 {
				t.Errorf("purge events = %+v, want one with 3 jobs, 2 attempts and a duration", ev)
			}

			// Once the open attempt's truth is recorded, the job goes too.
			if _, err := m.Fail(ctx, oa.ID, "provider says it never ran"); err != nil {
				t.Fatal(err)
			}
			res, err = m.Purge(ctx, jobs.PurgeOptions{})
			if err != nil || res.Jobs != 1 || res.Attempts != 1 {
				t.Errorf("second purge = %+v, %v; want the cancelled job and its attempt", res, err)
			}
			// Nothing left to do: idempotent.
			res, err = m.Purge(ctx, jobs.PurgeOptions{Retention: time.Hour * 24})
			if err != nil || res.Jobs != 0 {
				t.Errorf("third purge = %+v, %v; want nothing", res, err)
			}
			// A shorter retention reaches the recent job.
			res, err = m.Purge(ctx, jobs.PurgeOptions{Retention: 30 * time.Minute})
			if err != nil || res.Jobs != 1 || jobExists(t, s, recent.ID) {
				t.Errorf("purge with 30m retention = %+v, %v; want the recent job", res, err)
			}
			checkNoViolations(t, s)
		})
	}
}

func TestPurgedKeyIsANewIntent(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sc.open(t)
			clk := jobstest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			m, err := jobs.New(s, jobs.Options{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}

			old := submitOK(t, m, chargeReq("u", "k"))
			runToSuccess(t, m, old)
			clk.Advance(25 * time.Hour)
			// Before the purge, the key replays the old job.
			if j, created, err := m.Submit(ctx, chargeReq("u", "k")); err != nil || created || j.ID != old.ID {
				t.Fatalf("replay before purge = %s, %v, %v", j.ID, created, err)
			}
			// And a different intent under it is a conflict.
			other := chargeReq("u", "k")
			other.Params = json.RawMessage(`{"amount":1}`)
			if _, _, err := m.Submit(ctx, other); !errors.Is(err, jobs.ErrKeyConflict) {
				t.Fatalf("other intent before purge: err = %v, want ErrKeyConflict", err)
			}
			if res, err := m.Purge(ctx, jobs.PurgeOptions{}); err != nil || res.Jobs != 1 {
				t.Fatalf("purge = %+v, %v", res, err)
			}
			j, created, err := m.Submit(ctx, other)
			if err != nil || !created || j.ID == old.ID || j.State != jobs.JobPending || j.Attempts != 0 {
				t.Fatalf("resubmit after purge = %+v, created %v, %v; want a new pending job", j, created, err)
			}
			if got, err := m.GetByKey(ctx, "u", "k"); err != nil || got.ID != j.ID {
				t.Fatalf("GetByKey = %s, %v; want %s", got.ID, err, j.ID)
			}
		})
	}
}

func TestPurgeInvalidOptions(t *testing.T) {
	t.Parallel()
	s := testdb.NewSQLite(t)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := submitOK(t, m, chargeReq("u", "k"))
	if _, err := m.CancelJob(ctx, old.ID, "x"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []jobs.PurgeOptions{
		{Retention: -time.Second},
		{BatchSize: -1},
		{BatchSize: jobs.MaxPurgeBatchSize + 1},
	} {
		o.OlderThan = time.Now().Add(time.Hour)
		if _, err := m.Purge(ctx, o); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("Purge(%+v): err = %v, want ErrInvalidInput", o, err)
		}
	}
	if !jobExists(t, s, old.ID) {
		t.Error("an invalid purge deleted a job")
	}
	if err := m.NewPurger(jobs.PurgerOptions{Purge: jobs.PurgeOptions{BatchSize: -1}}).Run(ctx); !errors.Is(err, jobs.ErrInvalidInput) {
		t.Errorf("Purger.Run with a bad batch size: err = %v, want ErrInvalidInput", err)
	}
}

// TestPurgeDuringSubmitStorm purges the keys that a crowd of clients keeps
// submitting. Every submit must get the key's one job: the old one until it
// is purged, then exactly one new one, never two.
func TestPurgeDuringSubmitStorm(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sc.open(t)
			const keys, clients, rounds, purgers = 40, 6, 15, 3

			// Old, closed jobs: the real clock minus two days.
			oldClock := jobstest.NewClock(time.Now().Add(-48 * time.Hour))
			setup, err := jobs.New(s, jobs.Options{Clock: oldClock})
			if err != nil {
				t.Fatal(err)
			}
			oldIDs := map[string]string{}
			for k := range keys {
				key := fmt.Sprintf("k%02d", k)
				j := submitOK(t, setup, chargeReq("u", key))
				if k%2 == 0 {
					runToSuccess(t, setup, j)
				} else if _, err := setup.CancelJob(ctx, j.ID, "x"); err != nil {
					t.Fatal(err)
				}
				oldIDs[key] = j.ID
			}
			// Old but open: must survive every purge.
			openOld := submitOK(t, setup, chargeReq("u", "open"))

			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu      sync.Mutex
				seen    = map[string]map[string]bool{} // key -> job IDs returned
				created = map[string][]string{}        // key -> job IDs created
			)
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, clients*rounds*keys+purgers*rounds)
			var purged atomic.Int64
			for c := range clients {
				wg.Go(func() {
					<-start
					for r := range rounds {
						for k := range keys {
							key := fmt.Sprintf("k%02d", (k+c*7+r)%keys)
							j, isNew, err := m.Submit(ctx, chargeReq("u", key))
							if err != nil {
								errs <- fmt.Errorf("submit %s: %w", key, err)
								continue
							}
							mu.Lock()
							if seen[key] == nil {
								seen[key] = map[string]bool{}
							}
							seen[key][j.ID] = true
							if isNew {
								created[key] = append(created[key], j.ID)
							}
							mu.Unlock()
						}
					}
				})
			}
			for range purgers {
				wg.Go(func() {
					<-start
					for range rounds {
						res, err := m.Purge(ctx, jobs.PurgeOptions{BatchSize: 7})
						if err != nil {
							errs <- fmt.Errorf("purge: %w", err)
							return
						}
						purged.Add(res.Jobs)
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}

			if got := purged.Load(); got != keys {
				t.Errorf("purged %d jobs in all, want each old job exactly once (%d)", got, keys)
			}
			for k := range keys {
				key := fmt.Sprintf("k%02d", k)
				if len(created[key]) > 1 {
					t.Errorf("key %s: %d jobs created (%v), want at most one", key, len(created[key]), created[key])
				}
				cur, err := m.GetByKey(ctx, "u", key)
				if err != nil {
					t.Errorf("key %s: %v", key, err)
					continue
				}
				// Every job a client saw is the old one or the one new one.
				for id := range seen[key] {
					if id != oldIDs[key] && id != cur.ID {
						t.Errorf("key %s: a client got job %s, which is neither the purged job nor the current one", key, id)
					}
				}
				if cur.ID == oldIDs[key] {
					t.Errorf("key %s: old job survived three purgers", key)
				} else if len(created[key]) != 1 || created[key][0] != cur.ID {
					t.Errorf("key %s: current job %s, created %v", key, cur.ID, created[key])
				}
			}
			if !jobExists(t, s, openOld.ID) {
				t.Error("an old open job was purged")
			}
			checkNoViolations(t, s)
		})
	}
}

// TestConcurrentPurgers runs several purgers over the same backlog: every
// job is deleted once, and together they report exactly the backlog.
func TestConcurrentPurgers(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sc.open(t)
			const n = 120
			old, err := jobs.New(s, jobs.Options{Clock: jobstest.NewClock(time.Now().Add(-72 * time.Hour))})
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				j := submitOK(t, old, chargeReq("u", fmt.Sprintf("k%03d", i)))
				runToSuccess(t, old, j)
			}
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var jobsDone, attemptsDone atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 4 {
				wg.Go(func() {
					<-start
					res, err := m.Purge(ctx, jobs.PurgeOptions{BatchSize: 10})
					if err != nil {
						t.Errorf("purge: %v", err)
					}
					jobsDone.Add(res.Jobs)
					attemptsDone.Add(res.Attempts)
				})
			}
			close(start)
			wg.Wait()
			if jobsDone.Load() != n || attemptsDone.Load() != n {
				t.Errorf("purgers removed %d jobs and %d attempts, want %d and %d", jobsDone.Load(), attemptsDone.Load(), n, n)
			}
			if left, err := m.Purge(ctx, jobs.PurgeOptions{DryRun: true}); err != nil || left.Jobs != 0 {
				t.Errorf("left after purge: %+v, %v", left, err)
			}
			snap, err := invariant.TakeSnapshot(ctx, s)
			if err != nil || len(snap.Jobs) != 0 {
				t.Errorf("jobs left: %d, %v", len(snap.Jobs), err)
			}
		})
	}
}

// TestPurgeUsesItsIndex checks the plan of the batch query: it must read
// intentjobs_jobs_created_at_idx, not scan the table.
func TestPurgeUsesItsIndex(t *testing.T) {
	t.Parallel()
	cutoff := time.Now()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewSQLite(t)
		plan := explainPlan(t, s.DB(), `EXPLAIN QUERY PLAN `+jobs.PurgeStatement(jobs.SQLite), cutoff.UnixMicro(), 10)
		if !strings.Contains(plan, "intentjobs_jobs_created_at_idx") {
			t.Errorf("plan does not use intentjobs_jobs_created_at_idx:\n%s", plan)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewPostgres(t)
		// Fill the table so that the planner has a reason to prefer the index.
		m, err := jobs.New(s, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			submitOK(t, m, chargeReq("u", fmt.Sprintf("k%d", i)))
		}
		plan := postgresPlan(t, s.DB(), "intentjobs_jobs", jobs.PurgeStatement(jobs.Postgres), cutoff, 10)
		if !strings.Contains(plan, "intentjobs_jobs_created_at_idx") {
			t.Errorf("plan does not use intentjobs_jobs_created_at_idx:\n%s", plan)
		}
	})
}

// postgresPlan returns PostgreSQL's plan for query, with fresh statistics
// of table and sequential scans priced out: a plan without an index then
// means the query's predicate does not match it.
func postgresPlan(t testing.TB, db *sql.DB, table, query string, args ...any) string {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{`ANALYZE ` + table, `SET LOCAL enable_seqscan = off`} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return explainPlan(t, tx, `EXPLAIN `+query, args...)
}

// queryPlan returns the lines of an EXPLAIN's output.
func explainPlan(t testing.TB, q jobs.DBTX, query string, args ...any) string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(any)
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatalf("explain: %v", err)
		}
		for _, v := range vals {
			fmt.Fprintf(&b, "%v ", *(v.(*any)))
		}
		b.WriteString("\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("explain: %v", err)
	}
	return b.String()
}

func checkNoViolations(t testing.TB, s testdb.Store) {
	t.Helper()
	v, err := invariant.Check(context.Background(), s)
	if err != nil {
		t.Fatalf("check invariants: %v", err)
	}
	for _, x := range v {
		t.Errorf("invariant violated: %s", x)
	}
}

func TestBackgroundPurger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.NewSQLite(t)
	old, err := jobs.New(s, jobs.Options{Clock: jobstest.NewClock(time.Now().Add(-48 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	j := submitOK(t, old, chargeReq("u", "k"))
	runToSuccess(t, old, j)

	passes := make(chan jobs.Event, 100)
	m := jobstest.NewManager(t, s, jobs.Options{Observer: jobs.ObserverFunc(func(_ context.Context, e jobs.Event) {
		if e.Type == jobs.EventPurged {
			select {
			case passes <- e:
			default:
			}
		}
	})})
	stop := m.StartPurger(ctx, jobs.PurgerOptions{Interval: time.Millisecond, Jitter: time.Millisecond})
	first := <-passes
	if first.Count != 1 {
		t.Errorf("first pass purged %d jobs, want 1", first.Count)
	}
	if second := <-passes; second.Count != 0 {
		t.Errorf("second pass purged %d jobs, want 0", second.Count)
	}
	stop() // returns once the purger's goroutine has
	stop() // safe twice
	if jobExists(t, s, j.ID) {
		t.Error("the background purger did not purge the old job")
	}

	// Run returns the context's error when it ends.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.NewPurger(jobs.PurgerOptions{}).Run(rctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel = %v, want context.Canceled", err)
	}
}

func TestBackgroundPurgerReportsErrors(t *testing.T) {
	t.Parallel()
	s := testdb.NewSQLite(t)
	m, err := jobs.New(s, jobs.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // every pass now fails
	errs := make(chan error, 10)
	stop := m.StartPurger(context.Background(), jobs.PurgerOptions{Interval: time.Millisecond, Jitter: -1,
		OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		}})
	defer stop()
	for range 2 { // it keeps going after a failure
		if err := <-errs; !errors.Is(err, jobs.ErrStorage) {
			t.Errorf("OnError got %v, want ErrStorage", err)
		}
	}
}

func TestManagerRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := testdb.NewSQLite(t)
	clk := jobstest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if got := jobstest.NewManager(t, s, jobs.Options{}).Retention(); got != jobs.DefaultRetention {
		t.Errorf("default Retention() = %v, want %v", got, jobs.DefaultRetention)
	}
	m, err := jobs.New(s, jobs.Options{Clock: clk, Retention: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Retention(); got != 2*time.Hour {
		t.Errorf("Retention() = %v, want 2h", got)
	}
	j := submitOK(t, m, chargeReq("u", "k"))
	if _, err := m.CancelJob(ctx, j.ID, "x"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if res, err := m.Purge(ctx, jobs.PurgeOptions{}); err != nil || res.Jobs != 0 {
		t.Errorf("purge after 1h of 2h retention = %+v, %v; want nothing", res, err)
	}
	clk.Advance(time.Hour + time.Second)
	if res, err := m.Purge(ctx, jobs.PurgeOptions{}); err != nil || res.Jobs != 1 {
		t.Errorf("purge after 2h of 2h retention = %+v, %v; want the job", res, err)
	}
}

// TestPurgeDuringRetriedCompletes purges jobs whose winners keep repeating
// their Complete (a client retrying after an ambiguous failure). The
// retries lock the attempt, then its job; the purge locks jobs, then their
// attempts. Neither may deadlock or fail the other: a retry sees the job,
// or, once it is purged, ErrNotFound.
func TestPurgeDuringRetriedCompletes(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := sc.open(t)
			const n = 30
			old, err := jobs.New(s, jobs.Options{Clock: jobstest.NewClock(time.Now().Add(-48 * time.Hour))})
			if err != nil {
				t.Fatal(err)
			}
			winners := make([]string, n)
			for i := range n {
				winners[i] = runToSuccess(t, old, submitOK(t, old, chargeReq("u", fmt.Sprintf("k%02d", i)))).ID
			}
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range 4 {
				wg.Go(func() {
					<-start
					for r := range 12 {
						for i := range n {
							_, err := m.Complete(ctx, winners[(i+w*7+r)%n], json.RawMessage(`{"ok":true}`))
							if err != nil && !errors.Is(err, jobs.ErrNotFound) {
								t.Errorf("retried complete: %v", err)
							}
						}
					}
				})
			}
			var purged atomic.Int64
			for range 2 {
				wg.Go(func() {
					<-start
					for range 5 {
						res, err := m.Purge(ctx, jobs.PurgeOptions{BatchSize: 4})
						if err != nil {
							t.Errorf("purge: %v", err)
						}
						purged.Add(res.Jobs)
					}
				})
			}
			close(start)
			wg.Wait()
			res, err := m.Purge(ctx, jobs.PurgeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := purged.Load() + res.Jobs; got != n {
				t.Errorf("purged %d jobs in all, want %d", got, n)
			}
		})
	}
}

// A purge cutoff outside the years 1 to 9999 is invalid input on both
// stores, deleting nothing: PostgreSQL would refuse it as a timestamp out of
// range, and on SQLite a cutoff past the year 294246 would overflow into the
// past and silently purge nothing. Cutoffs at the edges of the range work.
func TestPurgeRefusesCutoffOutsideSupportedYears(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		s, _ := sc.Open(t)
		m, err := jobs.New(s, jobs.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.CancelJob(ctx, j.ID, "done"); err != nil {
			t.Fatal(err)
		}
		for _, cutoff := range []time.Time{
			time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC),
		} {
			for _, dry := range []bool{true, false} {
				_, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: cutoff, DryRun: dry})
				var in *jobs.InputError
				if !errors.As(err, &in) || in.Field != "OlderThan" {
					t.Errorf("Purge before %v (dry run %v): %v; want an *InputError for OlderThan", cutoff, dry, err)
				}
			}
		}
		if _, err := m.Get(ctx, j.ID); err != nil {
			t.Fatalf("the closed job after refused purges: %v", err)
		}
		if r, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}); err != nil || r.Jobs != 0 {
			t.Errorf("Purge before the year 1: %v, %d jobs; want none purged", err, r.Jobs)
		}
		if r, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}); err != nil || r.Jobs != 1 {
			t.Errorf("Purge before the year 9999 ends: %v, %d jobs; want the closed one purged", err, r.Jobs)
		}
	})
}
