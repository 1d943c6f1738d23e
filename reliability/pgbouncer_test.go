package reliability_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// pgBouncerBin is Debian's PgBouncer (see .ci/steps/30-pgbouncer.sh).
const pgBouncerBin = "/usr/sbin/pgbouncer"

// bouncer is a PgBouncer in transaction pooling mode in front of the test
// PostgreSQL, started by the first test that needs it and stopped by
// TestMain. PgBouncer 1.18 passes no search_path to the server, so each
// store gets a role of its own whose search_path (ALTER ROLE … SET) is its
// schema; PgBouncer pools per (database, role), so stores never share a
// server connection's settings. Its trust authentication still wants each
// role in its auth_file, which is rewritten and reloaded (SIGHUP) for each.
type bouncer struct {
	dir   string
	port  int
	cmd   *exec.Cmd
	owner *syscall.Credential

	mu    sync.Mutex
	users []string
}

var (
	bouncerOnce sync.Once
	theBouncer  *bouncer
	bouncerErr  error
)

func startBouncer() (*bouncer, error) {
	bouncerOnce.Do(func() { theBouncer, bouncerErr = newBouncer() })
	return theBouncer, bouncerErr
}

// stopBouncer stops the bouncer if one was started.
func stopBouncer() {
	if theBouncer != nil {
		theBouncer.cmd.Process.Signal(syscall.SIGTERM)
		theBouncer.cmd.Wait()
		os.RemoveAll(theBouncer.dir)
	}
}

func newBouncer() (*bouncer, error) {
	dir, err := os.MkdirTemp("", "jobs-pgbouncer-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := &bouncer{dir: dir, port: port}
	// PgBouncer refuses to run as root.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgbouncer must not run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		b.owner = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 4
max_client_conn = 400
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
pidfile = %s
`, b.port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	if err := b.write("pgbouncer.ini", ini); err != nil {
		return nil, err
	}
	if err := b.write("users.txt", ""); err != nil {
		return nil, err
	}
	b.cmd = exec.Command(pgBouncerBin, filepath.Join(dir, "pgbouncer.ini"))
	// Pdeathsig: if the test binary dies without stopping it, so does it.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.owner, Pdeathsig: syscall.SIGTERM}
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(b.port))
		if err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.cmd.Process.Kill()
			b.cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			return nil, fmt.Errorf("pgbouncer did not listen on %d: %v\n%s", b.port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bouncer) write(name, content string) error {
	p := filepath.Join(b.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return err
	}
	if b.owner != nil {
		return os.Chown(p, int(b.owner.Uid), int(b.owner.Gid))
	}
	return nil
}

// allow adds role to the auth_file and reloads PgBouncer.
func (b *bouncer) allow(role string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.users = append(b.users, role)
	var content string
	for _, u := range b.users {
		content += strconv.Quote(u) + ` ""` + "\n"
	}
	if err := b.write("users.txt", content); err != nil {
		return err
	}
	return b.cmd.Process.Signal(syscall.SIGHUP)
}

// bouncerDSN returns the DSN, through the bouncer, of a new schema owned by
// a new role whose search_path it is; both are dropped when t ends. It
// skips or fails like testdb.PostgresDSN when PostgreSQL is not
// configured, and skips when PgBouncer is not installed.
func bouncerDSN(t testing.TB) string {
	t.Helper()
	direct := testdb.PostgresDSN(t) // skips without PostgreSQL
	if _, err := os.Stat(pgBouncerBin); err != nil {
		if os.Getenv(testdb.EnvRequirePostgres) == "1" {
			t.Fatalf("PgBouncer required in CI but %s is missing: run .ci/steps/30-pgbouncer.sh", pgBouncerBin)
		}
		t.Skipf("PgBouncer tests skipped: %s not installed (apt-get install pgbouncer)", pgBouncerBin)
	}
	b, err := startBouncer()
	if err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	admin, err := sql.Open("pgx", direct)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	role := fmt.Sprintf("jobs_pgb_%d", rand.Uint64()%1e12)
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN`,
		`CREATE SCHEMA ` + role + ` AUTHORIZATION ` + role,
		`ALTER ROLE ` + role + ` SET search_path = ` + role,
	} {
		if _, err := admin.Exec(q); err != nil {
			admin.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx := context.WithoutCancel(context.Background())
		// The bouncer keeps idle server connections of the role.
		admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		for _, q := range []string{`DROP SCHEMA ` + role + ` CASCADE`, `DROP ROLE ` + role} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	if err := b.allow(role); err != nil {
		t.Fatal(err)
	}
	// The settings pgx needs behind a transaction pooler: no named prepared
	// statements, which live on one server connection (exec mode sends each
	// statement with the unnamed one, in one round trip).
	dsn := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=exec", role, b.port, databaseOf(t, direct))
	// Wait until the reload has taken the new role in.
	deadline := time.Now().Add(10 * time.Second)
	for {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return dsn
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect through pgbouncer as %s: %v", role, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func databaseOf(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || len(u.Path) < 2 {
		t.Fatalf("cannot find the database name in %s: %v", dsn, err)
	}
	return u.Path[1:]
}

// bouncerStore opens a store through the bouncer (see bouncerDSN).
func bouncerStore(t testing.TB) *jobs.PostgresStore {
	t.Helper()
	s, err := jobs.OpenPostgres(context.Background(), bouncerDSN(t))
	if err != nil {
		t.Fatalf("open postgres through pgbouncer: %v", err)
	}
	s.DB().SetMaxOpenConns(8)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPgBouncerTransactionPooling checks the premise of the other tests
// through the bouncer: consecutive statements of one client do run on
// different server connections, so nothing may rely on session state.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	s := bouncerStore(t)
	ctx := context.Background()
	pids := map[int]bool{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 8 {
		wg.Go(func() {
			for range 20 {
				var pid int
				if err := s.DB().QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				pids[pid] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var path string
	if err := s.DB().QueryRowContext(ctx, `SHOW search_path`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d server connections behind one pool; search_path %s", len(pids), path)
	if len(pids) > 4 {
		t.Errorf("%d server backends: the bouncer is not pooling (default_pool_size 4)", len(pids))
	}
}

// TestConformanceThroughPgBouncer runs the whole conformance suite against
// PostgreSQL behind PgBouncer in transaction pooling mode.
func TestConformanceThroughPgBouncer(t *testing.T) {
	t.Parallel()
	jobstest.Run(t, func(t testing.TB) jobs.Store { return bouncerStore(t) })
}

// records is a slog handler that keeps the records it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// warnings returns the messages of the warning records, with their
// attributes.
func (h *records) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if r.Level != slog.LevelWarn {
			continue
		}
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool {
			msg += " " + a.String()
			return true
		})
		out = append(out, msg)
	}
	return out
}

// waitedJob submits a job through m, starts an attempt, and waits for it in
// a goroutine; complete closes it and returns what Wait answered, and when
// relative to Complete's call.
func waitedJob(t *testing.T, m *jobs.Manager, key string) (complete func() (jobs.Job, error, time.Duration)) {
	t.Helper()
	ctx := context.Background()
	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		job jobs.Job
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		got, err := m.Wait(wctx, j.ID)
		done <- answer{got, err, time.Now()}
	}()
	return func() (jobs.Job, error, time.Duration) {
		called := time.Now()
		if _, err := m.Complete(ctx, a.ID, json.RawMessage(`"done"`)); err != nil {
			t.Fatal(err)
		}
		got := <-done
		return got.job, got.err, got.at.Sub(called)
	}
}

// TestWaitThroughPgBouncerIsNotifiedWithListenDSN: through PgBouncer in
// transaction pooling mode, a store opened with ListenDSN set to a direct
// connection hears the notification of a job that closes, and Wait
// returns on it; nothing is logged.
func TestWaitThroughPgBouncerIsNotifiedWithListenDSN(t *testing.T) {
	t.Parallel()
	dsn := bouncerDSN(t)
	s, err := jobs.OpenPostgres(context.Background(), dsn, jobs.ListenDSN(os.Getenv(testdb.EnvPostgresDSN)))
	if err != nil {
		t.Fatalf("open through pgbouncer with a direct ListenDSN: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	logs := &records{}
	m, err := jobs.New(s, jobs.Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "notified", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	wake, stop, err := s.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatalf("NotifyClosed with a direct ListenDSN: %v", err)
	}
	defer stop()
	if _, err := m.Complete(ctx, a.ID, json.RawMessage(`"done"`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(time.Minute):
		t.Fatal("no notification a minute after the job closed: the listening connection does not hear it")
	}

	complete := waitedJob(t, m, "waited")
	got, err, took := complete()
	if err != nil || got.State != jobs.JobSucceeded {
		t.Fatalf("Wait = %s, %v; want the succeeded job", got.State, err)
	}
	t.Logf("through PgBouncer with a direct ListenDSN, Wait returned %v after Complete was called", took.Round(10*time.Microsecond))
	if w := logs.warnings(); len(w) > 0 {
		t.Errorf("warnings logged: %q", w)
	}
}

// TestWaitThroughPgBouncerWarnsThatItPolls: through PgBouncer in
// transaction pooling mode, without ListenDSN, the store finds that its
// listening connection cannot hear notifications; Wait polls instead of
// waiting for one, and the Manager logs once, at warning level, why and
// what to do.
func TestWaitThroughPgBouncerWarnsThatItPolls(t *testing.T) {
	t.Parallel()
	s := bouncerStore(t)
	logs := &records{}
	m, err := jobs.New(s, jobs.Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := s.NotifyClosed(context.Background(), "job_unknown"); err == nil {
		t.Error("NotifyClosed through a transaction pooler succeeded; want an error saying that notifications cannot arrive")
	}
	for i := range 3 {
		complete := waitedJob(t, m, fmt.Sprint("polled-", i))
		if i == 0 {
			// The first Wait finds that it cannot listen, and says so,
			// before its job completes: a job completed before Wait first
			// reads it is answered at once, without listening.
			for deadline := time.Now().Add(30 * time.Second); len(logs.warnings()) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("a Wait through PgBouncer logged no warning in 30s")
				}
			}
		}
		got, err, took := complete()
		if err != nil || got.State != jobs.JobSucceeded {
			t.Fatalf("Wait = %s, %v; want the succeeded job", got.State, err)
		}
		t.Logf("through PgBouncer without ListenDSN, Wait %d returned %v after Complete was called", i, took.Round(time.Millisecond))
	}
	w := logs.warnings()
	if len(w) != 1 {
		t.Fatalf("%d warnings logged after three Waits: %q; want one", len(w), w)
	}
	for _, want := range []string{"Wait polls", "PgBouncer", "ListenDSN"} {
		if !strings.Contains(w[0], want) {
			t.Errorf("warning %q does not mention %q", w[0], want)
		}
	}
}
