package reliability_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
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
// skips or fails like jobstest.PostgresDSN when PostgreSQL is not
// configured, and skips when PgBouncer is not installed.
func bouncerDSN(t testing.TB) string {
	t.Helper()
	direct := jobstest.PostgresDSN(t) // skips without PostgreSQL
	if _, err := os.Stat(pgBouncerBin); err != nil {
		if os.Getenv(jobstest.EnvRequirePostgres) == "1" {
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
func bouncerStore(t testing.TB) *jobs.SQLStore {
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
