package linearcheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/linearcheck"
)

func TestMain(m *testing.M) {
	if code, ok := child(); ok {
		os.Exit(code)
	}
	testdb.Main(m)
}

// run is one recorded run: its directory, and the Sink of this process
// or, for a run recorded as the stores' tests record theirs, the
// jobstest.Recorder.
type run struct {
	t     *testing.T
	dir   string
	sink  *history.Sink
	rec   *jobstest.Recorder
	inner jobs.Store
}

// newRun records the calls made to inner through the stores it hands out.
func newRun(t *testing.T, inner jobs.Store) *run {
	t.Helper()
	return joinRun(t, inner, filepath.Join(t.TempDir(), "history"))
}

// joinRun records this process's calls into dir, where other processes
// may have recorded theirs.
func joinRun(t *testing.T, inner jobs.Store, dir string) *run {
	t.Helper()
	sink, err := history.NewSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return &run{t: t, dir: dir, sink: sink, inner: inner}
}

// recordedRun records the calls made to inner as the stores' concurrent
// tests do, with a jobstest.Recorder: a run directory under
// $JOBS_HISTORY_DIR named after t, closed when t ends.
func recordedRun(t *testing.T, inner jobs.Store) *run {
	t.Helper()
	rec := jobstest.NewRecorder(t)
	if rec == nil {
		t.Fatalf("%s is not set", jobstest.EnvHistoryDir)
	}
	return &run{t: t, dir: rec.Dir(), rec: rec, inner: inner}
}

// store returns inner recorded as the calls of client.
func (r *run) store(client string) jobs.Store {
	if r.rec != nil {
		return r.rec.Store(r.inner, client)
	}
	return history.Record(r.inner, r.sink, client)
}

// manager returns a Manager over the store of client.
func (r *run) manager(client string, opts jobs.Options) *jobs.Manager {
	r.t.Helper()
	m, err := jobs.New(r.store(client), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// load closes the Sink and reads the history back.
func (r *run) load() *history.History {
	r.t.Helper()
	if err := r.sink.Close(); err != nil {
		r.t.Fatal(err)
	}
	h, err := history.Load(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// check loads the history and checks it, logging its size and the time
// the check took.
func (r *run) check() linearcheck.Result {
	r.t.Helper()
	res := linearcheck.Check(r.load())
	r.t.Log(res.Summary())
	return res
}

// mustBeLinearizable checks the run and fails the test with the report if
// it is not linearizable, keeping the history (the test's directory goes)
// in the system's temporary directory with the visualization next to it.
func (r *run) mustBeLinearizable() linearcheck.Result {
	r.t.Helper()
	res := r.check()
	if !res.Ok() {
		r.t.Errorf("%s", res.Report())
		r.keep(res)
	}
	return res
}

// keep copies the run's history into a directory of the system's
// temporary directory, writes the visualization next to it, and says
// where.
func (r *run) keep(res linearcheck.Result) {
	r.t.Helper()
	name := "linearcheck-" + strings.NewReplacer("/", "_", " ", "_").Replace(r.t.Name()) + "-" + time.Now().Format("150405.000")
	dir := filepath.Join(os.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(r.dir, "*.jsonl"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		}
	}
	f, err := os.Create(filepath.Join(dir, "linearizability.html"))
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if err := res.Visualize(f); err != nil {
		r.t.Errorf("visualize: %v", err)
	}
	r.t.Logf("history and visualization kept in %s", dir)
}
