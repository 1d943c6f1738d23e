package jobstest

import (
	"fmt"
	"os"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// EnvHistoryDir names the directory under which concurrent tests record
// the histories of their stores, one run directory per store, when it is
// set. The test TestHistories of module linearcheck checks every run
// recorded under it for linearizability. Unset, nothing is recorded.
const EnvHistoryDir = "JOBS_HISTORY_DIR"

// Recorder records the calls made to one store, by every actor of every
// process of a test, as one history (package history) in a run directory
// under $JOBS_HISTORY_DIR.
//
// A nil *Recorder records nothing: its Store returns the store it is
// given, unchanged, and its Dir is empty. NewRecorder returns nil when
// JOBS_HISTORY_DIR is not set, so that a test calls it unconditionally
// and costs nothing unless histories are wanted.
//
// Run records the suite's concurrent cases on its own, on every store;
// a store's own concurrent tests use a Recorder directly:
//
//	rec := jobstest.NewRecorder(t)           // a run of t, if JOBS_HISTORY_DIR is set
//	m := jobstest.NewManager(t, rec.Store(store, "worker-1"), jobs.Options{})
//	cmd.Env = append(cmd.Env, "MY_HISTORY_DIR="+rec.Dir()) // a child process joins the run
//
// and in the child process:
//
//	rec, err := jobstest.JoinRecorder(os.Getenv("MY_HISTORY_DIR")) // nil, nil for ""
//	defer rec.Close()
//
// Record the store from the moment it is empty, and every actor that
// writes to it: a write the history does not hold makes the answers that
// follow look impossible. Reads made beside it (snapshots, ledgers) may
// go unrecorded.
type Recorder struct {
	dir  string
	sink *history.Sink
}

// NewRecorder starts recording a run of t: a new run directory under
// $JOBS_HISTORY_DIR named after t, and a Sink of this process in it,
// closed when t ends (t fails if a line could not be written). It returns
// nil if JOBS_HISTORY_DIR is not set.
func NewRecorder(t testing.TB) *Recorder {
	t.Helper()
	root := os.Getenv(EnvHistoryDir)
	if root == "" {
		return nil
	}
	dir, err := history.RunDir(root, t.Name())
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	r, err := JoinRecorder(dir)
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("jobstest: the history of %s is incomplete: %v", t.Name(), err)
		}
	})
	return r
}

// JoinRecorder records this process's calls into dir, the run directory
// of a Recorder of another process (its Dir), with a Sink of its own. It
// returns nil and no error if dir is empty: the parent records nothing.
// Close it when the process's calls are over; a process killed before
// leaves its calls without a return, which the checker treats as
// ambiguous.
func JoinRecorder(dir string) (*Recorder, error) {
	if dir == "" {
		return nil, nil
	}
	sink, err := history.NewSink(dir)
	if err != nil {
		return nil, fmt.Errorf("jobstest: %w", err)
	}
	return &Recorder{dir: dir, sink: sink}, nil
}

// Store returns s recorded as the calls of the actor client ("worker-3",
// "reconciler"), with exactly the capabilities of s but
// jobs.PgxTxStore (see history.Record); on a nil Recorder, s itself.
func (r *Recorder) Store(s jobs.Store, client string) jobs.Store {
	if r == nil {
		return s
	}
	return history.Record(s, r.sink, client)
}

// Dir returns the run directory, for the processes that join the run; ""
// on a nil Recorder.
func (r *Recorder) Dir() string {
	if r == nil {
		return ""
	}
	return r.dir
}

// Close closes the Recorder's Sink, and returns the first error writing
// to it met: a history with calls missing would be judged wrongly. Calls
// made through its stores after Close are lost, and make a second Close
// fail. Closing a nil Recorder does nothing.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	return r.sink.Close()
}
