package linearcheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/linearcheck"
	"github.com/intentjobs/jobs/memstore"
)

// EnvHistoryDir names the directory whose recorded runs TestHistories
// checks: every directory under it that holds history files is one run.
const EnvHistoryDir = "JOBS_HISTORY_DIR"

// TestHistories checks every run recorded under $JOBS_HISTORY_DIR (by the
// concurrent tests of the stores, wrapped with history.Record). It fails
// if there is none, so that a run that recorded nothing cannot pass. For
// each run that is not linearizable, it prints the trace of each
// violation and writes porcupine's visualization next to the history, as
// linearizability.html.
func TestHistories(t *testing.T) {
	root := os.Getenv(EnvHistoryDir)
	if root == "" {
		t.Skipf("set %s to check the histories recorded under it", EnvHistoryDir)
	}
	runs, err := history.Runs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatalf("no history under %s=%s: the tests that should have recorded some recorded none", EnvHistoryDir, root)
	}
	for _, dir := range runs {
		name, err := filepath.Rel(root, dir)
		if err != nil || name == "." {
			name = filepath.Base(dir)
		}
		t.Run(name, func(t *testing.T) {
			h, err := history.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			res := linearcheck.Check(h)
			t.Log(res.Summary())
			if res.Ok() {
				return
			}
			path := filepath.Join(dir, "linearizability.html")
			if f, err := os.Create(path); err != nil {
				t.Error(err)
			} else {
				if err := res.Visualize(f); err != nil {
					t.Errorf("visualize: %v", err)
				}
				f.Close()
				t.Logf("visualization: %s", path)
			}
			t.Errorf("%s", res.Report())
		})
	}
}

// TestHistoriesEntryPoint runs TestHistories in a child process on a root
// with a linearizable run and a broken one, on a root with the good one
// only, and on an empty root.
func TestHistoriesEntryPoint(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	record := func(name string, inner jobs.Store) *run {
		dir, err := history.RunDir(root, name)
		if err != nil {
			t.Fatal(err)
		}
		return joinRun(t, inner, dir)
	}
	good := record("TestGood/sub", memstore.New())
	raceCompletes(t, good, 3)
	good.load()
	broken := record("TestBroken", &staleReads{Store: memstore.New(), cache: map[string]jobs.Job{}})
	ctx := context.Background()
	m := broken.manager("caller", options)
	j := submit(t, m, "stale", jobs.KeyReuseNever)
	m.Get(ctx, j.ID)
	m.CancelJob(ctx, j.ID, "operator")
	m.Get(ctx, j.ID)
	broken.load()

	entry := func(root string) (string, error) { return runTestHistories(t, root) }
	out, err := entry(root)
	if err == nil {
		t.Errorf("TestHistories passed with a broken run:\n%s", out)
	}
	for _, want := range []string{"--- PASS: TestHistories/TestGood_sub-", "--- FAIL: TestHistories/TestBroken-", "NOT LINEARIZABLE", "linearizability.html"} {
		if !strings.Contains(out, want) {
			t.Errorf("TestHistories does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(broken.dir, "linearizability.html")); err != nil {
		t.Errorf("no visualization next to the broken history: %v", err)
	}
	if _, err := os.Stat(filepath.Join(good.dir, "linearizability.html")); err == nil {
		t.Error("a visualization next to the good history")
	}

	os.RemoveAll(broken.dir)
	if out, err := entry(root); err != nil {
		t.Errorf("TestHistories failed on a good run: %v\n%s", err, out)
	}
	if out, err := entry(t.TempDir()); err == nil || !strings.Contains(out, "recorded none") {
		t.Errorf("TestHistories on an empty directory: %v\n%s", err, out)
	}
}

// runTestHistories runs TestHistories in a child process on root, as CI
// runs it, and returns its verbose output.
func runTestHistories(t *testing.T, root string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHistories$", "-test.v")
	cmd.Env = append(os.Environ(), EnvHistoryDir+"="+root)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHistoriesCatchRecordedBugs records concurrent workloads the way the
// stores' tests record theirs under JOBS_HISTORY_DIR (jobstest.Recorder):
// racing completions and purges beside late results, on SQLite as it is
// and on SQLite broken on purpose (two winners of one compare-and-swap; a
// purge that frees the key of a job whose attempt is in doubt). Then
// TestHistories, run on that directory as CI runs it, fails, naming each
// broken run with its trace, and passes the others.
func TestHistoriesCatchRecordedBugs(t *testing.T) {
	root := t.TempDir()
	t.Setenv(jobstest.EnvHistoryDir, root)
	workloads := []struct {
		name   string
		broken bool
		store  func(sq *jobs.SQLiteStore) jobs.Store
		drive  func(t *testing.T, r *run)
	}{
		{"completes", false, func(sq *jobs.SQLiteStore) jobs.Store { return sq }, func(t *testing.T, r *run) { raceCompletes(t, r, 4) }},
		{"two-winners", true, func(sq *jobs.SQLiteStore) jobs.Store { return twoWinners{sq, sq.DB()} }, func(t *testing.T, r *run) { raceCompletes(t, r, 4) }},
		{"purge", false, func(sq *jobs.SQLiteStore) jobs.Store { return sq }, func(t *testing.T, r *run) { purgeKeyInDoubt(t, r, 2) }},
		{"purge-in-doubt", true, func(sq *jobs.SQLiteStore) jobs.Store { return purgeInDoubt{sq, sq.DB()} }, func(t *testing.T, r *run) { purgeKeyInDoubt(t, r, 2) }},
	}
	for _, w := range workloads {
		t.Run(w.name, func(t *testing.T) {
			w.drive(t, recordedRun(t, w.store(testdb.NewSQLite(t))))
		})
	}
	out, err := runTestHistories(t, root)
	if err == nil {
		t.Errorf("TestHistories passed with broken runs:\n%s", out)
	}
	for _, w := range workloads {
		verdict := map[bool]string{false: "--- PASS", true: "--- FAIL"}[w.broken]
		if want := verdict + ": TestHistories/TestHistoriesCatchRecordedBugs_" + w.name + "-"; !strings.Contains(out, want) {
			t.Errorf("TestHistories does not say %q", want)
		}
	}
	for _, want := range []string{"NOT LINEARIZABLE", "the contract says: refused ErrLostRace", "created = true; want false"} {
		if !strings.Contains(out, want) {
			t.Errorf("TestHistories does not say %q", want)
		}
	}
	if t.Failed() {
		t.Logf("TestHistories said:\n%s", out)
	}
}
