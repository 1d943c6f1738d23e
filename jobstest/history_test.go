package jobstest

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/memstore"
)

// TestRecorderOff: without JOBS_HISTORY_DIR a Recorder is nil, and its
// store is the store itself.
func TestRecorderOff(t *testing.T) {
	t.Setenv(EnvHistoryDir, "")
	r := NewRecorder(t)
	if r != nil {
		t.Fatalf("NewRecorder without %s = %+v, want nil", EnvHistoryDir, r)
	}
	s := memstore.New()
	if got := r.Store(s, "c"); got != jobs.Store(s) {
		t.Errorf("a nil Recorder's Store = %T, want the store itself", got)
	}
	if r.Dir() != "" || r.Close() != nil {
		t.Errorf("a nil Recorder: Dir %q, Close %v", r.Dir(), r.Close())
	}
	if r, err := JoinRecorder(""); r != nil || err != nil {
		t.Errorf("JoinRecorder(\"\") = %v, %v; want nil, nil", r, err)
	}
}

// TestRecorderOn: with JOBS_HISTORY_DIR set, a run directory named after
// the test holds the calls of this process and of a joined Recorder (as a
// child process's), each as its client, with their outcomes.
func TestRecorderOn(t *testing.T) {
	root := t.TempDir()
	t.Setenv(EnvHistoryDir, root)
	var dir string
	t.Run("run", func(t *testing.T) {
		r := NewRecorder(t)
		dir = r.Dir()
		if filepath.Dir(dir) != root {
			t.Fatalf("run directory %s is not under %s", dir, root)
		}
		s := memstore.New()
		m := NewManager(t, r.Store(s, "parent"), jobs.Options{})
		j, _, err := m.Submit(t.Context(), req("owner-1", "k"))
		if err != nil {
			t.Fatal(err)
		}
		joined, err := JoinRecorder(dir)
		if err != nil {
			t.Fatal(err)
		}
		other := NewManager(t, joined.Store(s, "child"), jobs.Options{})
		a, err := other.StartAttempt(t.Context(), j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.StartAttempt(t.Context(), j.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
			t.Fatalf("second attempt: %v", err)
		}
		if _, err := m.Complete(t.Context(), a.ID, json.RawMessage(`{"ok":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := joined.Close(); err != nil {
			t.Fatal(err)
		}
	}) // the run's Sink is closed as its test ends

	runs, err := history.Runs(root)
	if err != nil || len(runs) != 1 || runs[0] != dir {
		t.Fatalf("runs under the root: %v, %v; want [%s]", runs, err, dir)
	}
	h, err := history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Processes) != 2 {
		t.Errorf("%d files of calls, want 2 (the run's and the joined one)", len(h.Processes))
	}
	clients := map[string]int{}
	outcomes := map[history.Outcome]int{}
	for _, op := range h.Ops {
		clients[op.Client]++
		outcomes[op.Outcome]++
		if !op.Returned {
			t.Errorf("op %s of %s never returned", op.Method, op.Client)
		}
	}
	if clients["parent"] == 0 || clients["child"] == 0 {
		t.Errorf("calls by client: %v; want some of parent and of child", clients)
	}
	if outcomes[history.Refused] == 0 || outcomes[history.OK] == 0 {
		t.Errorf("outcomes: %v; want the refused second attempt beside the others", outcomes)
	}
	if base := filepath.Base(dir); !strings.HasPrefix(base, "TestRecorderOn_run-") {
		t.Errorf("run directory %s is not named after its test", base)
	}
}
