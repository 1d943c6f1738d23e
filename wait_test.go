package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// waitStores lists the waitStores every Wait test runs on.
var waitStores = []struct {
	name string
	open func(testing.TB) jobs.SQLStore
}{
	{"SQLite", func(t testing.TB) jobs.SQLStore { return testdb.NewSQLite(t) }},
	{"Postgres", func(t testing.TB) jobs.SQLStore { return testdb.NewPostgres(t) }},
}

func submitJob(t *testing.T, m *jobs.Manager, key string) jobs.Job {
	t.Helper()
	j, _, err := m.Submit(context.Background(), jobs.SubmitRequest{
		Owner: "alice", Key: key, Kind: "print", Provider: "laser", Params: json.RawMessage(`{"pages":1}`),
	})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return j
}

func startAttempt(t *testing.T, m *jobs.Manager, jobID string) jobs.Attempt {
	t.Helper()
	a, err := m.StartAttempt(context.Background(), jobID, "")
	if err != nil {
		t.Fatalf("start attempt: %v", err)
	}
	return a
}

func TestWait(t *testing.T) {
	t.Parallel()
	for _, st := range waitStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			m, err := jobs.New(st.open(t), jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			t.Run("returns when an attempt completes the job", func(t *testing.T) {
				j := submitJob(t, m, "complete")
				a := startAttempt(t, m, j.ID)
				done := make(chan struct{})
				var got jobs.Job
				var err error
				go func() {
					defer close(done)
					got, err = m.Wait(ctx, j.ID)
				}()
				if _, cerr := m.Complete(ctx, a.ID, json.RawMessage(`{"ok":true}`)); cerr != nil {
					t.Fatalf("complete: %v", cerr)
				}
				<-done
				if err != nil || got.State != jobs.JobSucceeded || string(got.Result) != `{"ok":true}` || got.CompletedBy != a.ID {
					t.Fatalf("Wait = %+v, %v; want the succeeded job with its result", got, err)
				}
			})

			t.Run("returns a job that is already terminal", func(t *testing.T) {
				j := submitJob(t, m, "cancelled")
				if _, err := m.CancelJob(ctx, j.ID, "changed my mind"); err != nil {
					t.Fatal(err)
				}
				got, err := m.Wait(ctx, j.ID)
				if err != nil || got.State != jobs.JobCancelled || got.Reason != "changed my mind" {
					t.Fatalf("Wait = %+v, %v; want the cancelled job", got, err)
				}
			})

			t.Run("returns the current job when the context ends", func(t *testing.T) {
				j := submitJob(t, m, "open")
				startAttempt(t, m, j.ID)
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				got, err := m.Wait(wctx, j.ID)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Wait error = %v; want context.DeadlineExceeded", err)
				}
				if got.ID != j.ID || got.State != jobs.JobRunning {
					t.Fatalf("Wait job = %+v; want the running job as last read", got)
				}
			})

			t.Run("errors", func(t *testing.T) {
				for _, tc := range []struct {
					id   string
					want error
				}{
					{"", jobs.ErrInvalidInput},
					{"job_00000000000000000000000000", jobs.ErrNotFound},
				} {
					if _, err := m.Wait(ctx, tc.id); !errors.Is(err, tc.want) {
						t.Errorf("Wait(%q) error = %v; want %v", tc.id, err, tc.want)
					}
				}
			})

			t.Run("many waiters on many jobs", func(t *testing.T) {
				const n = 12
				var js []jobs.Job
				var as []jobs.Attempt
				for i := range n {
					j := submitJob(t, m, fmt.Sprintf("many-%d", i))
					js = append(js, j)
					as = append(as, startAttempt(t, m, j.ID))
				}
				var wg sync.WaitGroup
				errs := make(chan error, 2*n)
				for i := range 2 * n { // two waiters per job
					wg.Add(1)
					go func() {
						defer wg.Done()
						j := js[i%n]
						got, err := m.Wait(ctx, j.ID)
						if err == nil && got.State != jobs.JobSucceeded {
							err = fmt.Errorf("job %s is %s", j.ID, got.State)
						}
						errs <- err
					}()
				}
				for _, a := range as {
					if _, err := m.Complete(ctx, a.ID, json.RawMessage(`1`)); err != nil {
						t.Fatal(err)
					}
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
			})
		})
	}
}

// TestNotifyClosed checks the PostgreSQL notification path on its own: a
// registered waiter is woken when its job closes, and only then.
func TestNotifyClosed(t *testing.T) {
	t.Parallel()
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		s := testdb.NewPostgres(t)
		m, err := jobs.New(s, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		j := submitJob(t, m, "notify")
		other := submitJob(t, m, "other")
		wake, stop, err := s.NotifyClosed(ctx, j.ID)
		if err != nil {
			t.Fatalf("NotifyClosed: %v", err)
		}
		defer stop()

		a := startAttempt(t, m, j.ID) // pending → running: not terminal
		if _, err := m.CancelJob(ctx, other.ID, "another job"); err != nil {
			t.Fatal(err)
		}
		// A notification for this job after the other job's proves that
		// the other one was not delivered here (NOTIFY keeps commit order
		// on one connection's session).
		if _, err := m.Complete(ctx, a.ID, json.RawMessage(`"done"`)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatal("no notification 10s after the job closed")
		}
		select {
		case <-wake:
			t.Fatal("woken twice for one close")
		default:
		}

		// A waiter registered after the store closed its listener can
		// register again: the listener restarts.
		stop()
		wake2, stop2, err := s.NotifyClosed(ctx, other.ID)
		if err != nil {
			t.Fatalf("NotifyClosed again: %v", err)
		}
		defer stop2()
		select {
		case <-wake2:
			t.Fatal("woken without a close")
		default:
		}
	})
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		var s jobs.Store = testdb.NewSQLite(t)
		if _, ok := s.(jobs.CloseNotifier); ok {
			t.Fatal("the SQLite store claims to notify; Wait must poll it")
		}
	})
}

// TestNotifyClosedOnlyForWaitedJobs: a job that closes while nobody waits
// for it sends no notification (each one costs every committer a global
// lock); a job with a waiter does.
func TestNotifyClosedOnlyForWaitedJobs(t *testing.T) {
	t.Parallel()
	s := testdb.NewPostgres(t)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var channel string // the store's schema's (see pgClosedChannel)
	if err := s.DB().QueryRowContext(ctx, `SELECT 'intentjobs_closed.' || current_schema()`).Scan(&channel); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	quiet := submitJob(t, m, "quiet")
	waited := submitJob(t, m, "waited")
	if _, err := m.CancelJob(ctx, quiet.ID, "nobody waits"); err != nil {
		t.Fatal(err)
	}
	wake, stop, err := s.NotifyClosed(ctx, waited.ID)
	if err != nil {
		t.Fatalf("NotifyClosed: %v", err)
	}
	defer stop()
	if _, err := m.CancelJob(ctx, waited.ID, "someone waits"); err != nil {
		t.Fatal(err)
	}
	<-wake
	// Notifications arrive in commit order: quiet's would come before
	// waited's.
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification for the waited job: %v", err)
		}
		if n.Payload == quiet.ID {
			t.Fatal("notified for a job nobody waited for")
		}
		if n.Payload == waited.ID {
			break
		}
	}
}

// TestNotifyClosedRacingCloses registers waiters and closes their jobs at
// the same moment, many jobs at once, half by Complete and half by
// CancelJob: a waiter that registered and then read its job still open must
// be woken, whichever of the waiter's mark and the close reached the row
// first. The mark itself changes nothing a reader of the job sees.
func TestNotifyClosedRacingCloses(t *testing.T) {
	t.Parallel()
	s := testdb.NewPostgres(t)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 48
	for round := range 3 {
		ids := make([]string, n)
		atts := make([]string, n)
		open := make([]jobs.Job, n) // as read before the race
		for i := range n {
			j := submitJob(t, m, fmt.Sprintf("race-%d-%d", round, i))
			ids[i] = j.ID
			atts[i] = startAttempt(t, m, j.ID).ID
			if open[i], err = s.Job(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(2)
			go func() { // the waiter, as Manager.Wait does it
				defer wg.Done()
				<-start
				wake, stop, err := s.NotifyClosed(ctx, ids[i])
				if err != nil {
					t.Errorf("NotifyClosed: %v", err)
					return
				}
				defer stop()
				j, err := s.Job(ctx, ids[i])
				if err != nil {
					t.Error(err)
					return
				}
				if j.State.Terminal() {
					return
				}
				if diff := cmp.Diff(open[i], j); diff != "" {
					t.Errorf("job %s read after the mark differs (-before +after):\n%s", j.ID, diff)
				}
				select {
				case <-wake:
				case <-time.After(10 * time.Second):
					t.Errorf("job %s: read open after the waiter registered, and no notification 10s later", ids[i])
				}
			}()
			go func() { // the close
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					_, err = m.Complete(ctx, atts[i], json.RawMessage(`"done"`))
				} else {
					_, err = m.CancelJob(ctx, ids[i], "racing a waiter")
				}
				if err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// TestNotifyClosedReconnects cuts the listening connection: the waiters are
// woken (notifications may have been lost), and the store listens again.
func TestNotifyClosedReconnects(t *testing.T) {
	t.Parallel()
	app := "jobs_listen_test_" + fmt.Sprint(time.Now().UnixNano())
	dsn := testdb.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	ctx := context.Background()
	s, err := jobs.OpenPostgres(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.DB().SetMaxOpenConns(4)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := submitJob(t, m, "reconnect")
	wake, stop, err := s.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	var n int
	err = s.DB().QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN "intentjobs_closed.%' AND pid <> pg_backend_pid()`, app).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminated %d listening backends (%v); want 1", n, err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken after the listening connection was lost")
	}
	// Listening again: wait until the new session is up, then a close wakes.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = s.DB().QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN "intentjobs_closed.%'`, app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store did not listen again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a := startAttempt(t, m, j.ID)
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after reconnecting")
	}
}

// TestWaitPoolOfOne: the listening connection is not taken from the
// store's pool, so waiters never starve the queries they wait for.
func TestWaitPoolOfOne(t *testing.T) {
	t.Parallel()
	s := testdb.NewPostgres(t)
	s.DB().SetMaxOpenConns(1)
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j := submitJob(t, m, "small-pool")
	a := startAttempt(t, m, j.ID)
	const waiters = 4
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			got, err := m.Wait(ctx, j.ID)
			if err == nil && got.State != jobs.JobSucceeded {
				err = fmt.Errorf("job is %s", got.State)
			}
			errs <- err
		}()
	}
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`true`)); err != nil {
		t.Fatalf("complete while %d waiters wait on a pool of one: %v", waiters, err)
	}
	for range waiters {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// flakyReads is a store whose Job reads fail with a storage error of kind
// while down is set, as during a failover; it counts the failed reads.
type flakyReads struct {
	jobs.SQLStore
	kind   jobs.StorageKind
	down   atomic.Bool
	failed chan struct{} // receives a value per failed read, while it has room
}

func (s *flakyReads) Job(ctx context.Context, id string) (jobs.Job, error) {
	if s.down.Load() {
		select {
		case s.failed <- struct{}{}:
		default:
		}
		return jobs.Job{}, &jobs.StorageError{Op: "get job", Kind: s.kind, Message: "the database is failing over"}
	}
	return s.SQLStore.Job(ctx, id)
}

// TestWaitKeepsWaitingWhileTheDatabaseIsUnavailable: a waiter rides
// through reads that fail because the database is unavailable or busy (a
// failover), and returns the job once it closes; other storage errors end
// the wait at once.
func TestWaitKeepsWaitingWhileTheDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, st := range waitStores {
		for _, tc := range []struct {
			kind         jobs.StorageKind
			keepsWaiting bool
		}{
			{jobs.StorageUnavailable, true},
			{jobs.StorageBusy, true},
			{jobs.StorageSchema, false},
		} {
			t.Run(st.name+"/"+string(tc.kind), func(t *testing.T) {
				t.Parallel()
				raw := st.open(t)
				direct, err := jobs.New(raw, jobs.Options{})
				if err != nil {
					t.Fatal(err)
				}
				j := submitJob(t, direct, "outage")
				a := startAttempt(t, direct, j.ID)

				flaky := &flakyReads{SQLStore: raw, kind: tc.kind, failed: make(chan struct{}, 100)}
				flaky.down.Store(true)
				type answer struct {
					job jobs.Job
					err error
				}
				done := make(chan answer, 1)
				go func() {
					got, err := jobstest.NewManager(t, flaky, jobs.Options{}).Wait(context.Background(), j.ID)
					done <- answer{got, err}
				}()
				if !tc.keepsWaiting {
					got := <-done
					if !errors.Is(got.err, jobs.ErrStorage) {
						t.Fatalf("Wait through a %s error = %v; want ErrStorage at once", tc.kind, got.err)
					}
					return
				}
				// A third failed read proves that Wait read again after
				// failures instead of returning the first one.
				for range 3 {
					select {
					case <-flaky.failed:
					case got := <-done:
						t.Fatalf("Wait returned %s, %v while the database was %s; want it to keep waiting", got.job.State, got.err, tc.kind)
					}
				}
				flaky.down.Store(false)
				for drained := false; !drained; {
					select {
					case <-flaky.failed:
					default:
						drained = true
					}
				}
				if _, err := direct.Complete(context.Background(), a.ID, json.RawMessage(`"done"`)); err != nil {
					t.Fatal(err)
				}
				got := <-done
				if got.err != nil || got.job.State != jobs.JobSucceeded || got.job.CompletedBy != a.ID {
					t.Fatalf("Wait after the outage = %s by %s, %v; want succeeded by %s", got.job.State, got.job.CompletedBy, got.err, a.ID)
				}
			})
		}
	}
}
