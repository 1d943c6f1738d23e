package mysql_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/mysql"
)

// The tests on a three-node Galera cluster (.ci/galera-ctl, started by
// .ci/steps/60-galera.sh): JOBS_TEST_GALERA_DSNS holds a DSN per node,
// JOBS_TEST_GALERA_CTL the controller that kills and restarts nodes.
// Without them the tests skip, unless JOBS_TEST_REQUIRE_GALERA=1. They
// run one at a time (no t.Parallel): one of them kills a node.

// galera is a database of the test's own on the cluster, with a store
// on each node.
type galera struct {
	ctl     string
	stores  []*mysql.Store
	m       []*jobs.Manager
	retries *retryCount
}

// retryCount counts the store's transactions run again, by error code.
type retryCount struct {
	mu     sync.Mutex
	byCode map[string]int
}

func (r *retryCount) observe(_ string, err error) {
	var se *jobs.StorageError
	code := "?"
	if errors.As(err, &se) {
		code = se.Code
	}
	r.mu.Lock()
	r.byCode[code]++
	r.mu.Unlock()
}

func (r *retryCount) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byCode) == 0 {
		return "none"
	}
	var parts []string
	for code, n := range r.byCode {
		parts = append(parts, fmt.Sprintf("%d of %s", n, code))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func (r *retryCount) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.byCode {
		n += v
	}
	return n
}

func galeraDSNs(t *testing.T) ([]string, string) {
	t.Helper()
	dsns := os.Getenv("JOBS_TEST_GALERA_DSNS")
	ctl := os.Getenv("JOBS_TEST_GALERA_CTL")
	if dsns == "" || ctl == "" {
		if os.Getenv("JOBS_TEST_REQUIRE_GALERA") == "1" {
			t.Fatal("JOBS_TEST_REQUIRE_GALERA=1 but JOBS_TEST_GALERA_DSNS or JOBS_TEST_GALERA_CTL is not set (source .ci/steps/60-galera.sh)")
		}
		t.Skip("no Galera cluster: source .ci/steps/60-galera.sh to start one (JOBS_TEST_GALERA_DSNS, JOBS_TEST_GALERA_CTL)")
	}
	list := strings.Split(dsns, ",")
	if len(list) != 3 {
		t.Fatalf("JOBS_TEST_GALERA_DSNS has %d DSNs; want 3", len(list))
	}
	return list, ctl
}

// galeraCtl runs the cluster's controller.
func galeraCtl(t testing.TB, ctl string, args ...string) {
	t.Helper()
	out, err := exec.Command(ctl, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("galera-ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func setupGalera(t *testing.T) *galera {
	t.Helper()
	dsns, ctl := galeraDSNs(t)
	// A cluster left broken by an earlier run is repaired first.
	galeraCtl(t, ctl, "up")
	g := &galera{ctl: ctl, retries: &retryCount{byCode: map[string]int{}}}
	dsn := newDatabase(t, dsns[0]) // replicated to every node
	name := dbName(t, dsn)
	for _, d := range dsns {
		cfg, err := gomysql.ParseDSN(d)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		cfg.Timeout = 2 * time.Second
		// One node's store is opened while another may still apply the
		// CREATE DATABASE: try again for a while.
		var s *mysql.Store
		for try := 0; ; try++ {
			s, err = mysql.Open(t.Context(), cfg.FormatDSN(), mysql.ObserveRetry(g.retries.observe), mysql.MaxRetries(40))
			if err == nil || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("open on %s: %v", cfg.Addr, err)
		}
		if !s.Galera() {
			t.Fatalf("%s is not a Galera node (wsrep_on is off)", cfg.Addr)
		}
		s.DB().SetMaxOpenConns(16)
		t.Cleanup(func() { s.Close() })
		g.stores = append(g.stores, s)
		m, _ := newManager(t, s)
		g.m = append(g.m, m)
	}
	return g
}

// The same key submitted through all three nodes at once: one job, and
// every caller gets its ID. The nodes' inserts conflict at certification;
// the losers run their insert again and find the winner's row.
func TestGaleraSameKeyOnEveryNode(t *testing.T) {
	g := setupGalera(t)
	ctx := t.Context()
	const perNode = 6
	rounds := size(40, 10)
	start := time.Now()
	for round := range rounds {
		key := fmt.Sprintf("key-%d", round)
		n := perNode * len(g.m)
		ids := make([]string, n)
		created := make([]bool, n)
		errs := make([]error, n)
		release(n, func(i int) {
			j, c, err := g.m[i%len(g.m)].Submit(ctx, charge("owner-1", key))
			ids[i], created[i], errs[i] = j.ID, c, err
		})
		c := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, caller %d on node %d: %v", round, i, i%len(g.m)+1, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: callers got jobs %s and %s", round, ids[0], ids[i])
			}
			if created[i] {
				c++
			}
		}
		if c != 1 {
			t.Fatalf("round %d: %d callers created the job; want 1", round, c)
		}
		// Every node holds that one job under the key.
		for i, m := range g.m {
			j, err := m.GetByKey(ctx, "owner-1", key)
			if err != nil || j.ID != ids[0] {
				t.Fatalf("round %d: node %d has %s, %v; want %s", round, i+1, j.ID, err, ids[0])
			}
		}
	}
	t.Logf("%d rounds of %d submits of one key over 3 nodes in %v; certification conflicts and lock waits retried: %s",
		rounds, perNode*len(g.m), time.Since(start).Round(time.Millisecond), g.retries)
	checkInvariants(t, g.stores[1])
}

// Attempts of one job completing through different nodes at once: exactly
// one winner, and every loser is told which attempt won.
func TestGaleraCompleteOnDifferentNodes(t *testing.T) {
	g := setupGalera(t)
	ctx := t.Context()
	rounds := size(40, 10)
	const attempts = 6
	start := time.Now()
	for round := range rounds {
		j, _, err := g.m[0].Submit(ctx, charge("owner-1", fmt.Sprintf("key-%d", round)))
		if err != nil {
			t.Fatal(err)
		}
		var atts []jobs.Attempt
		for i := range attempts {
			m := g.m[i%len(g.m)]
			a, err := m.StartAttempt(ctx, j.ID, "", jobs.Hedge())
			if err != nil {
				t.Fatalf("round %d: StartAttempt on node %d: %v", round, i%len(g.m)+1, err)
			}
			if _, err := m.MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil {
				t.Fatal(err)
			}
			atts = append(atts, a)
		}
		won := make([]bool, attempts)
		told := make([]string, attempts)
		release(attempts, func(i int) {
			// Each attempt completes through the node after the one that
			// started it.
			_, err := g.m[(i+1)%len(g.m)].Complete(ctx, atts[i].ID, json.RawMessage(fmt.Sprintf(`{"node":%d}`, (i+1)%len(g.m)+1)))
			var lost *jobs.LostRaceError
			switch {
			case err == nil:
				won[i], told[i] = true, atts[i].ID
			case errors.As(err, &lost):
				told[i] = lost.WinnerID
			default:
				t.Errorf("round %d: Complete of attempt %d: %v", round, i, err)
			}
		})
		winners := 0
		for i := range attempts {
			if won[i] {
				winners++
			}
		}
		for n, m := range g.m {
			got, err := m.Get(ctx, j.ID)
			if err != nil || got.State != jobs.JobSucceeded {
				t.Fatalf("round %d: node %d: job %s, %v", round, n+1, got.State, err)
			}
			for i := range attempts {
				if told[i] != got.CompletedBy {
					t.Errorf("round %d: attempt %s was told %q won; node %d says %s", round, atts[i].ID, told[i], n+1, got.CompletedBy)
				}
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d winners; want exactly 1", round, winners)
		}
	}
	t.Logf("%d rounds of %d attempts completing over 3 nodes in %v; certification conflicts and lock waits retried: %s",
		rounds, attempts, time.Since(start).Round(time.Millisecond), g.retries)
	checkInvariants(t, g.stores[2])
}

// One node SIGKILLed under load, then restarted: it rejoins, no write that
// a caller was told of is lost on any node, every error is typed, and
// every retry (through whichever node answers) reaches the same job.
func TestGaleraNodeKilledUnderLoad(t *testing.T) {
	g := setupGalera(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	const workers = 6
	perWorker := size(60, 25)
	var acked atomic.Int64 // intents carried out to the end
	var next atomic.Int64  // round robin over the nodes, moving on after each error
	var slowest atomic.Int64
	manager := func() *jobs.Manager { return g.m[int(next.Add(1))%len(g.m)] }

	results := make([][]*intent, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				in := &intent{m: manager, key: fmt.Sprintf("k-%d-%d", w, i), failures: map[string]int{}}
				began := time.Now()
				j, err := in.run(t, ctx, 2000)
				if d := time.Since(began); d.Nanoseconds() > slowest.Load() {
					slowest.Store(d.Nanoseconds())
				}
				if err != nil {
					t.Errorf("intent %s: %v", in.key, err)
					return
				}
				if j.State != jobs.JobSucceeded || j.CompletedBy != in.attempt {
					t.Errorf("intent %s: job %s %s by %s; want succeeded by %s", in.key, j.ID, j.State, j.CompletedBy, in.attempt)
				}
				results[w] = append(results[w], in)
				acked.Add(1)
			}
		}()
	}

	// Kill node 2 once a quarter of the work is done, start it again
	// once half is.
	total := int64(workers * perWorker)
	waitFor := func(n int64) {
		for acked.Load() < n && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(total / 4)
	killedAt := time.Now()
	galeraCtl(t, g.ctl, "kill", "2")
	ackedAtKill := acked.Load()
	waitFor(total / 2)
	down := time.Since(killedAt)
	startAt := time.Now()
	galeraCtl(t, g.ctl, "start", "2")
	rejoin := time.Since(startAt)
	// The first write through the restarted node.
	var firstWrite time.Duration
	for try := 0; ; try++ {
		_, _, err := g.m[1].Submit(ctx, charge("owner-1", "after-rejoin"))
		if err == nil {
			firstWrite = time.Since(startAt)
			break
		}
		typedError(t, "submit after rejoin", err)
		if try == 300 || ctx.Err() != nil {
			t.Fatalf("node 2 takes no write after it rejoined: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Every acknowledged intent, on every node: the same job, succeeded by
	// the attempt its caller started, with one attempt.
	failures := map[string]int{}
	n := 0
	for _, rs := range results {
		for _, in := range rs {
			n++
			for k, v := range in.failures {
				failures[k] += v
			}
			for node, m := range g.m {
				j, err := m.GetByKey(ctx, "owner-1", in.key)
				if err != nil || j.ID != in.jobID || j.State != jobs.JobSucceeded || j.CompletedBy != in.attempt {
					t.Errorf("node %d: key %s: job %s %s by %s, %v; want %s succeeded by %s", node+1, in.key, j.ID, j.State,
						j.CompletedBy, err, in.jobID, in.attempt)
				}
				if as, err := m.Attempts(ctx, in.jobID); err != nil || len(as) != 1 {
					t.Errorf("node %d: job %s has %d attempts, %v; want 1", node+1, in.jobID, len(as), err)
				}
			}
		}
	}
	if int64(n) != total {
		t.Fatalf("%d intents acknowledged; want %d", n, total)
	}
	t.Logf("%d intents over 3 nodes (%d before the kill); node 2 down %v, rejoined in %v (first write through it %v after its start); "+
		"slowest intent %v; typed failures retried by the callers: %v; certification conflicts and lock waits retried by the store: %s; 0 acknowledged writes lost",
		n, ackedAtKill, down.Round(time.Millisecond), rejoin.Round(time.Millisecond), firstWrite.Round(time.Millisecond),
		time.Duration(slowest.Load()).Round(time.Millisecond), failures, g.retries)
	for _, s := range g.stores {
		checkInvariants(t, s)
	}
}

// The whole conformance suite on the cluster: each case on a database of
// its own, through one of the nodes in turn.
func TestGaleraConformance(t *testing.T) {
	dsns, ctl := galeraDSNs(t)
	galeraCtl(t, ctl, "up")
	var next atomic.Int64
	jobstest.Run(t, func(t testing.TB) jobs.Store {
		node := int(next.Add(1)) % len(dsns)
		dsn := newDatabase(t, dsns[node])
		var s *mysql.Store
		var err error
		for try := 0; ; try++ {
			s, err = mysql.Open(context.Background(), dsn)
			if err == nil || try == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("open on node %d: %v", node+1, err)
		}
		s.DB().SetMaxOpenConns(16)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A database at schema version 1, opened through all three nodes at once
// by two stores each: Galera keeps no migration lock across nodes, so the
// upgrade to version 2 runs on several nodes at the same time. Every
// opener succeeds, and every node has the new columns and index, and the
// version recorded once.
func TestGaleraUpgradeOnEveryNode(t *testing.T) {
	dsns, ctl := galeraDSNs(t)
	galeraCtl(t, ctl, "up")
	dsn := newDatabase(t, dsns[0])
	name := dbName(t, dsn)
	if _, err := multiStatements(t, dsn).Exec(mysql.MigrationList()[0].SQL); err != nil {
		t.Fatalf("0001_init.sql: %v", err)
	}
	const perNode = 2
	stores := make([]*mysql.Store, perNode*len(dsns))
	errs := make([]error, len(stores))
	release(len(stores), func(i int) {
		d := withDB(t, dsns[i%len(dsns)], name)
		for try := 0; ; try++ { // the database may not have reached the node yet
			stores[i], errs[i] = mysql.Open(context.Background(), d)
			if errs[i] == nil || try == 50 {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d, on node %d: %v", i, i%len(dsns)+1, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	for node := range dsns {
		s := stores[node]
		applied, err := s.AppliedMigrations(t.Context())
		if err != nil || len(applied) != 2 {
			t.Errorf("node %d: AppliedMigrations = %+v, %v", node+1, applied, err)
		}
		if got := indexColumns(t, s.DB(), "intentjobs_attempts_provider_ref_idx"); got != "provider_ref(255)" {
			t.Errorf("node %d: intentjobs_attempts_provider_ref_idx is on %q", node+1, got)
		}
	}
	// A lookup recorded through one node is read through the others.
	m, _ := newManager(t, stores[0])
	j, _, err := m.Submit(t.Context(), charge("o", "k"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(t.Context(), j.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := stores[0].RecordLookup(t.Context(), jobs.AttemptLookup{AttemptID: a.ID, At: at, Answer: "pending"}); err != nil {
		t.Fatal(err)
	}
	for node := 1; node < len(dsns); node++ {
		states, err := stores[node].ReconcileStates(t.Context(), []string{a.ID})
		if err != nil || len(states) != 1 || states[0].LookupAnswer != "pending" || !states[0].LookupAt.Equal(at) {
			t.Errorf("node %d: ReconcileStates = %+v, %v", node+1, states, err)
		}
	}
}
