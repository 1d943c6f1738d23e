package reliability_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// withParam returns the URL DSN with one query parameter set.
func withParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN is not a URL: %v", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// runWorkload runs workers of the mixed workload against m and returns what
// the callers were told.
func runWorkload(ctx context.Context, m *jobs.Manager, workers, iters, keys int, base uint64, pause time.Duration, stop *atomic.Bool) *ledger {
	l := newLedger()
	var wg sync.WaitGroup
	for i := range workers {
		w := &workload{m: m, rng: rand.New(rand.NewPCG(base, uint64(i))), l: l, keys: keys, iters: iters, tries: 400, pause: pause, stop: stop}
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	return l
}

// TestTerminatedBackends kills the library's PostgreSQL connections
// (pg_terminate_backend, chosen by this test's application_name) again and
// again while the mixed workload runs: callers see storage errors, retry,
// and nothing is duplicated, lost or completed twice.
func TestTerminatedBackends(t *testing.T) {
	t.Parallel()
	app := "jobs_reliability_" + strconv.FormatUint(rand.Uint64()%1e9, 10)
	dsn := withParam(t, testdb.PostgresDSN(t), "application_name", app)
	store, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	store.DB().SetMaxOpenConns(6)
	t.Cleanup(func() { store.Close() })
	admin, err := sql.Open("pgx", os.Getenv(testdb.EnvPostgresDSN))
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	defer admin.Close()

	var killed atomic.Int64
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		// Thirty rounds, three seconds of killing: enough to hit every
		// kind of statement, and bounded however slow the machine is.
		for range 30 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var n int64
			err := admin.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
			if err != nil {
				t.Errorf("terminate: %v", err)
				return
			}
			killed.Add(n)
		}
	})
	stopWatch := watchTransitions(t, store, 250*time.Millisecond)
	rec := jobstest.NewRecorder(t)
	l := runWorkload(t.Context(), jobstest.NewManager(t, rec.Store(store, "workload"), jobs.Options{}), 4, 50*soak(), 60, seed(t), 5*time.Millisecond, nil)
	close(stop)
	killer.Wait()
	stopWatch()
	t.Logf("%d backends terminated under load; callers retried %d storage errors", killed.Load(), l.retried.Load())
	if killed.Load() == 0 {
		t.Error("no backend was terminated: the test proved nothing")
	}
	checkLedger(t, store, l)
}

// privatePostgres starts a PostgreSQL server of its own in a temporary
// directory, as the postgres OS user, on a free loopback port, and returns
// its DSN, and functions that stop and start it. It is stopped and removed
// when the test ends.
func privatePostgres(t *testing.T) (dsn string, stop, start func()) {
	t.Helper()
	bin := os.Getenv("JOBS_TEST_PG_BIN")
	if bin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(matches) == 0 {
			t.Fatal("no initdb found; set JOBS_TEST_PG_BIN to PostgreSQL's bin directory")
		}
		bin = filepath.Dir(matches[len(matches)-1])
	}
	dir, err := os.MkdirTemp("", "jobs-private-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	asPostgres := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		if os.Geteuid() != 0 {
			cmd = exec.Command(filepath.Join(bin, name), args...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	data := filepath.Join(dir, "data")
	asPostgres("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=20", port, dir)
	start = func() {
		asPostgres("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
	}
	stop = func() { asPostgres("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop") }
	start()
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop").Run()
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, start
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPostgresRestart stops a private PostgreSQL server in the middle of
// the mixed workload and starts it again a moment later: callers get
// storage errors while it is down, retry, and carry on once it is back,
// with nothing duplicated, lost or completed twice.
func TestPostgresRestart(t *testing.T) {
	t.Parallel()
	if os.Getenv(testdb.EnvPostgresDSN) == "" && os.Getenv(testdb.EnvRequirePostgres) != "1" {
		t.Skip("PostgreSQL tests skipped: set " + testdb.EnvPostgresDSN + " to run them (this one starts a private server)")
	}
	dsn, stop, start := privatePostgres(t)
	store, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	store.DB().SetMaxOpenConns(6)
	t.Cleanup(func() { store.Close() })

	m, err := jobs.New(jobstest.NewRecorder(t).Store(store, "workload"), jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stopLoad atomic.Bool
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		defer stopLoad.Store(true)
		time.Sleep(300 * time.Millisecond) // let the load get going
		stop()
		time.Sleep(time.Second)
		start()
		time.Sleep(500 * time.Millisecond) // and run a while after
	}()
	l := runWorkload(t.Context(), m, 4, 100000, 400*soak(), seed(t), 50*time.Millisecond, &stopLoad)
	<-restarted
	t.Logf("callers retried %d storage errors while the server was down", l.retried.Load())
	if l.retried.Load() == 0 {
		t.Error("no call failed: the restart did not happen under load")
	}
	// The library recovers: a new call after the restart works.
	if _, _, err := m.Submit(context.Background(), submitReq("after-restart")); err != nil {
		t.Fatalf("submit after the restart: %v", err)
	}
	checkLedger(t, store, l)
}

// sqliteFixture opens a store on a new file with one job in it.
func sqliteFixture(t *testing.T) (path string, s jobs.SQLStore, m *jobs.Manager, j jobs.Job) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "jobs.db")
	s = testdb.NewSQLiteAt(t, path)
	m = jobstest.NewManager(t, s, jobs.Options{})
	j, _, err := m.Submit(context.Background(), submitReq("existing"))
	if err != nil {
		t.Fatal(err)
	}
	return path, s, m, j
}

func wantStorageKind(t *testing.T, err error, kind jobs.StorageKind) {
	t.Helper()
	var se *jobs.StorageError
	if !errors.As(err, &se) || se.Kind != kind || !errors.Is(err, jobs.ErrStorage) {
		t.Fatalf("got %v, want a *StorageError of kind %s", err, kind)
	}
}

func integrityOK(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q %v", res, err)
	}
}

// TestSQLiteReadOnly covers a database that refuses writes, in the two ways
// that work even for root (who ignores file permissions): a read-only open
// (mode=ro) and a connection switched to query_only. Writes fail with a
// read-only StorageError, write nothing, and the file stays sound.
func TestSQLiteReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("mode=ro", func(t *testing.T) {
		t.Parallel()
		path, s, _, j := sqliteFixture(t)
		s.Close()
		ro, err := jobs.OpenSQLite(ctx, "file:"+path+"?mode=ro", jobs.SkipMigrations())
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		m, err := jobs.New(ro, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := m.Get(ctx, j.ID); err != nil || got.ID != j.ID {
			t.Fatalf("read from a read-only database: %v", err)
		}
		_, _, err = m.Submit(ctx, submitReq("new"))
		wantStorageKind(t, err, jobs.StorageReadOnly)
		_, err = m.StartAttempt(ctx, j.ID, "")
		wantStorageKind(t, err, jobs.StorageReadOnly)
		if _, err := m.GetByKey(ctx, "alice", "new"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("partial job after a refused submit: %v", err)
		}
		if as, _ := m.Attempts(ctx, j.ID); len(as) != 0 {
			t.Fatalf("partial attempt: %v", as)
		}
		integrityOK(t, path)
	})
	t.Run("query_only", func(t *testing.T) {
		t.Parallel()
		path, s, m, j := sqliteFixture(t)
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB().Exec(`PRAGMA query_only = ON`); err != nil {
			t.Fatal(err)
		}
		_, _, err = m.Submit(ctx, submitReq("new"))
		wantStorageKind(t, err, jobs.StorageReadOnly)
		_, err = m.Complete(ctx, a.ID, json.RawMessage(`1`))
		wantStorageKind(t, err, jobs.StorageReadOnly)
		_, err = m.MarkRunning(ctx, a.ID, "ref")
		wantStorageKind(t, err, jobs.StorageReadOnly)
		_, err = m.CancelJob(ctx, j.ID, "stop")
		wantStorageKind(t, err, jobs.StorageReadOnly)
		if _, err := s.DB().Exec(`PRAGMA query_only = OFF`); err != nil {
			t.Fatal(err)
		}
		got, _ := m.Get(ctx, j.ID)
		att, _ := m.Attempt(ctx, a.ID)
		if got.State != jobs.JobRunning || got.Version != 1 || att.State != jobs.AttemptStarting {
			t.Fatalf("refused writes left a trace: job %s v%d, attempt %s", got.State, got.Version, att.State)
		}
		if _, err := m.GetByKey(ctx, "alice", "new"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("partial job: %v", err)
		}
		// Writable again: the same calls now work.
		if _, err := m.Complete(ctx, a.ID, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
		integrityOK(t, path)
	})
}

// TestSQLiteFull fills the database up to PRAGMA max_page_count: the write
// that does not fit fails with a full StorageError and leaves nothing
// behind; what was stored before is intact.
func TestSQLiteFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, s, _, j := sqliteFixture(t)
	m, err := jobs.New(s, jobs.Options{MaxParamsBytes: 1 << 20, MaxResultBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.DB().QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`PRAGMA max_page_count = ` + strconv.Itoa(pages+40)); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 64<<10) + `"}`)
	stored := 0
	for i := range 100 {
		_, _, err = m.Submit(ctx, jobs.SubmitRequest{Owner: "alice", Key: fmt.Sprintf("big-%d", i), Kind: "charge", Provider: "p1", Params: big})
		if err != nil {
			break
		}
		stored++
	}
	wantStorageKind(t, err, jobs.StorageFull)
	if _, err := m.GetByKey(ctx, "alice", fmt.Sprintf("big-%d", stored)); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("partial job after a full database: %v", err)
	}
	for i := range stored {
		if _, err := m.GetByKey(ctx, "alice", fmt.Sprintf("big-%d", i)); err != nil {
			t.Fatalf("job %d stored before the disk filled: %v", i, err)
		}
	}
	// A result too big for the space left: the CAS does not happen.
	huge := json.RawMessage(`"` + strings.Repeat("y", 3<<20) + `"`)
	_, err = m.Complete(ctx, a.ID, huge)
	wantStorageKind(t, err, jobs.StorageFull)
	got, _ := m.Get(ctx, j.ID)
	att, _ := m.Attempt(ctx, a.ID)
	if got.State != jobs.JobRunning || got.Result != nil || att.State != jobs.AttemptStarting {
		t.Fatalf("a refused completion left a trace: job %s %q, attempt %s", got.State, got.Result, att.State)
	}
	t.Logf("%d jobs of 64 KiB stored before the database was full", stored)
	integrityOK(t, path)
	assertInvariants(t, s)
}
