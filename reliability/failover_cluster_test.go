package reliability_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The failover cluster's environment, exported by
// .ci/steps/40-pgfailover.sh.
const (
	// envFailoverDSN reaches the cluster's primary whichever node it is: a
	// multi-host DSN with target_session_attrs=read-write.
	envFailoverDSN = "JOBS_TEST_FAILOVER_DSN"
	// envFailoverMonitor is the pg_auto_failover monitor's database.
	envFailoverMonitor = "JOBS_TEST_FAILOVER_MONITOR"
	// envFailoverDir is the cluster's state directory: a data directory per
	// node, named after the node, and pg_autoctl's files.
	envFailoverDir = "JOBS_TEST_FAILOVER_DIR"
	// envRequireFailover, set to 1, turns a missing cluster from a skip
	// into a failure. The step script sets it, so CI does.
	envRequireFailover = "JOBS_TEST_REQUIRE_FAILOVER"
)

// pgCluster is a pg_auto_failover cluster: a monitor and two PostgreSQL
// nodes with synchronous replication, one primary and one standby.
type pgCluster struct {
	dsn     string
	dir     string
	monitor *sql.DB
	owner   *syscall.Credential // the state directory's owner, when the test runs as root
}

// pgNode is one data node as the monitor sees it.
type pgNode struct {
	Name     string
	Port     int
	Reported string // the state the node last reported
	Goal     string // the state the monitor assigned to it
}

func (n pgNode) String() string {
	return fmt.Sprintf("%s(:%d %s/%s)", n.Name, n.Port, n.Reported, n.Goal)
}

// failoverCluster returns the cluster started by .ci/steps/40-pgfailover.sh
// once it is healthy. It skips the test when the cluster is not configured
// or not reachable, or fails it when JOBS_TEST_REQUIRE_FAILOVER=1.
func failoverCluster(t *testing.T) *pgCluster {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(envRequireFailover) == "1" {
			t.Fatalf("PostgreSQL failover cluster required (%s=1): %s", envRequireFailover, msg)
		}
		t.Skipf("failover tests skipped: %s; start a cluster with `source .ci/steps/40-pgfailover.sh`", msg)
	}
	c := &pgCluster{dsn: os.Getenv(envFailoverDSN), dir: os.Getenv(envFailoverDir)}
	mon := os.Getenv(envFailoverMonitor)
	if c.dsn == "" || c.dir == "" || mon == "" {
		missing("%s, %s and %s are not all set", envFailoverDSN, envFailoverMonitor, envFailoverDir)
	}
	fi, err := os.Stat(c.dir)
	if err != nil {
		missing("state directory: %v", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid != 0 {
		c.owner = &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
	}
	if c.monitor, err = sql.Open("pgx", mon); err != nil {
		missing("monitor: %v", err)
	}
	c.monitor.SetMaxOpenConns(2)
	t.Cleanup(func() { c.monitor.Close() })
	if err := c.monitor.PingContext(t.Context()); err != nil {
		missing("monitor unreachable: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := c.waitFor(ctx, "one primary and one secondary", healthy); err != nil {
		t.Fatalf("the failover cluster is not healthy: %v", err)
	}
	return c
}

// nodes reads the data nodes' states from the monitor.
func (c *pgCluster) nodes(ctx context.Context) ([]pgNode, error) {
	rows, err := c.monitor.QueryContext(ctx, `SELECT nodename, nodeport, reportedstate, goalstate
		FROM pgautofailover.node ORDER BY nodeid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ns []pgNode
	for rows.Next() {
		var n pgNode
		if err := rows.Scan(&n.Name, &n.Port, &n.Reported, &n.Goal); err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return ns, rows.Err()
}

// healthy: one node is primary and the other secondary, both as reported
// and as assigned; synchronous replication is on.
func healthy(ns []pgNode) bool {
	var primaries, secondaries int
	for _, n := range ns {
		switch {
		case n.Reported == "primary" && n.Goal == "primary":
			primaries++
		case n.Reported == "secondary" && n.Goal == "secondary":
			secondaries++
		}
	}
	return len(ns) == 2 && primaries == 1 && secondaries == 1
}

// primaryOf returns the node that is primary, or takes writes while its
// standby catches up (wait_primary), as it reports and as the monitor
// wants. A primary that stopped reporting after it crashed still shows
// its last report, primary, with another goal.
func primaryOf(ns []pgNode) (pgNode, bool) {
	for _, n := range ns {
		if n.Reported == n.Goal && (n.Reported == "primary" || n.Reported == "wait_primary") {
			return n, true
		}
	}
	return pgNode{}, false
}

// waitFor polls the monitor until cond holds, and returns the nodes then.
func (c *pgCluster) waitFor(ctx context.Context, what string, cond func([]pgNode) bool) ([]pgNode, error) {
	var last []pgNode
	var lastErr error
	for {
		ns, err := c.nodes(ctx)
		if err == nil && cond(ns) {
			return ns, nil
		}
		if err != nil {
			lastErr = err
		} else {
			last = ns
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for %s: %w; nodes: %v (last error %v)", what, ctx.Err(), last, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// autoctl runs pg_autoctl as the owner of the state directory, with the
// environment the step script gives it.
func (c *pgCluster) autoctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "pg_autoctl", args...)
	cmd.Dir = c.dir
	cmd.Env = []string{
		"PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin",
		"HOME=" + c.dir,
		"XDG_CONFIG_HOME=" + filepath.Join(c.dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(c.dir, "share"),
		"XDG_RUNTIME_DIR=" + filepath.Join(c.dir, "run"),
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.owner}
	return cmd.CombinedOutput()
}

// performFailover asks the monitor to promote the standby, as an operator
// does with `pg_autoctl perform failover`, and returns once it has.
func (c *pgCluster) performFailover(ctx context.Context) error {
	out, err := c.autoctl(ctx, "perform", "failover", "--pgdata", filepath.Join(c.dir, "monitor"))
	if err != nil {
		return fmt.Errorf("pg_autoctl perform failover: %v\n%s", err, out)
	}
	return nil
}

// crash kills node n's postmaster with SIGKILL while its pg_autoctl
// processes are stopped (SIGSTOP), as if its machine had died: the monitor
// sees a primary that neither answers nor reports, and promotes the
// standby. resume lets pg_autoctl run again; it restarts PostgreSQL, learns
// from the monitor that the node was demoted, and rewinds it to rejoin as
// the standby. Call resume in any case (it is idempotent).
func (c *pgCluster) crash(n pgNode) (resume func(), err error) {
	pgdata := filepath.Join(c.dir, n.Name)
	keeper, err := keeperPIDs(filepath.Join(c.dir, "run", "pg_autoctl", pgdata, "pg_autoctl.pid"))
	if err != nil {
		return nil, fmt.Errorf("pg_autoctl of %s: %w", n.Name, err)
	}
	postmaster, err := postmasterPID(pgdata)
	if err != nil {
		return nil, fmt.Errorf("postmaster of %s: %w", n.Name, err)
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			for _, pid := range keeper {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
	for _, pid := range keeper {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			resume()
			return nil, fmt.Errorf("stop pg_autoctl %d: %w", pid, err)
		}
	}
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		resume()
		return nil, fmt.Errorf("kill postmaster %d: %w", postmaster, err)
	}
	return resume, nil
}

// keeperPIDs reads pg_autoctl's pid file: the supervisor's pid on the first
// line, and its services' on the lines "<pid> <service>".
func keeperPIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	first, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return nil, fmt.Errorf("%s: no pid on the first line", path)
	}
	pids := []int{first}
	for _, line := range lines[1:] {
		if f := strings.Fields(line); len(f) == 2 {
			if pid, err := strconv.Atoi(f[0]); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// postmasterPID reads the pid on the first line of postmaster.pid.
func postmasterPID(pgdata string) (int, error) {
	path := filepath.Join(pgdata, "postmaster.pid")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("%s: no pid on the first line", path)
	}
	return pid, nil
}
