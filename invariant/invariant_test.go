package invariant_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
)

// healthySnapshot builds a real store with a job of every shape and returns
// its snapshot, which must have no violation.
func healthySnapshot(t *testing.T) *invariant.Snapshot {
	t.Helper()
	ctx := context.Background()
	s := testdb.NewSQLite(t)
	m, err := jobs.New(s, jobs.Options{Hedging: true})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(key string) jobs.Job {
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	start := func(j jobs.Job) jobs.Attempt {
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	submit("pending")
	// succeeded, with a lost hedge
	j := submit("succeeded")
	a1 := start(j)
	must(m.MarkRunning(ctx, a1.ID, "r1"))
	a2 := start(j)
	must(m.MarkRunning(ctx, a2.ID, "r2"))
	must(m.Complete(ctx, a2.ID, json.RawMessage(`{"ok":true}`)))
	if _, err := m.Complete(ctx, a1.ID, json.RawMessage(`{"late":true}`)); err == nil {
		t.Fatal("late completion accepted")
	}
	// failed after a failed attempt
	j = submit("failed")
	a := start(j)
	must(m.Fail(ctx, a.ID, "no"))
	must(m.FailJob(ctx, j.ID, "gave up"))
	// cancelled with an attempt in doubt
	j = submit("cancelled")
	a = start(j)
	must(m.MarkUnknown(ctx, a.ID, "timeout"))
	must(m.CancelJob(ctx, j.ID, "stop"))
	// failed, and its key taken over by a new job for the same intent
	j = submit("reused")
	must(m.FailJob(ctx, j.ID, "gave up"))
	if n, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "reused", Kind: "k", Provider: "p",
		Params: json.RawMessage(`{}`), Reuse: jobs.KeyReuseAfterFailure}); err != nil || !created || n.ID == j.ID {
		t.Fatalf("Submit with key reuse = %s, %v, %v; want a new job", n.ID, created, err)
	}
	// running
	j = submit("running")
	a = start(j)
	must(m.MarkRunning(ctx, a.ID, "r"))

	snap, err := invariant.TakeSnapshot(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if v := snap.Check(); len(v) != 0 {
		t.Fatalf("healthy store reported violations: %v", v)
	}
	return snap
}

func clone(s *invariant.Snapshot) *invariant.Snapshot {
	out := &invariant.Snapshot{Jobs: slices.Clone(s.Jobs), Attempts: map[string][]jobs.Attempt{}}
	for id, as := range s.Attempts {
		out.Attempts[id] = slices.Clone(as)
	}
	return out
}

// find returns the index of the job with the given key, and its attempts.
func find(t *testing.T, s *invariant.Snapshot, key string) (int, []jobs.Attempt) {
	t.Helper()
	for i, j := range s.Jobs {
		if j.Key == key {
			return i, s.Attempts[j.ID]
		}
	}
	t.Fatalf("no job with key %s", key)
	return 0, nil
}

// retired returns the index of the job whose key was taken over, and the
// index of the job that took it.
func retired(t *testing.T, s *invariant.Snapshot) (old, replacement int) {
	t.Helper()
	old, replacement = -1, -1
	for i, j := range s.Jobs {
		if j.ReplacedBy != "" {
			old = i
		}
	}
	for i, j := range s.Jobs {
		if old >= 0 && j.ID == s.Jobs[old].ReplacedBy {
			replacement = i
		}
	}
	if old < 0 || replacement < 0 {
		t.Fatal("no retired key in the snapshot")
	}
	return old, replacement
}

// TestCheckerCatchesCorruption feeds the checker snapshots corrupted in
// each way the invariants forbid, and expects the right rule to fire: a
// checker that cannot fail proves nothing.
func TestCheckerCatchesCorruption(t *testing.T) {
	t.Parallel()
	healthy := healthySnapshot(t)
	tests := []struct {
		name    string
		rule    string
		corrupt func(t *testing.T, s *invariant.Snapshot)
	}{
		{"duplicate job for a key", "one-job-per-key", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "pending")
			dup := s.Jobs[i]
			dup.ID = "job_DUPLICATE"
			s.Jobs = append(s.Jobs, dup)
		}},
		{"winner is not one of its attempts", "winner-is-attempt", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "succeeded")
			s.Jobs[i].CompletedBy = "att_SOMEONE_ELSE"
		}},
		{"two succeeded attempts", "one-winner", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "succeeded")
			as[0].State = jobs.AttemptSucceeded
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"late result stored on a cancelled job", "no-late-result", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "cancelled")
			s.Jobs[i].Result = json.RawMessage(`{"late":true}`)
		}},
		{"succeeded without result", "winner-result", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "succeeded")
			s.Jobs[i].Result = nil
		}},
		{"two attempts in doubt", "one-in-doubt", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "running")
			as[0].State = jobs.AttemptUnknown
			extra := as[0]
			extra.ID, extra.Seq, extra.State = "att_EXTRA", 2, jobs.AttemptStarting
			s.Attempts[s.Jobs[i].ID] = append(as, extra)
			s.Jobs[i].Attempts = 2
		}},
		{"failed job with an open attempt", "failed-job-idle", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "failed")
			as[0].State, as[0].FinishedAt = jobs.AttemptRunning, time.Time{}
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"lost without a winner", "lost-to-a-winner", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "running")
			as[0].State, as[0].FinishedAt = jobs.AttemptLost, time.Now()
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"attempt count drift", "attempt-count", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "running")
			s.Jobs[i].Attempts = 5
		}},
		{"attempt seq gap", "attempt-seq", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "succeeded")
			as[1].Seq = 3
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"invalid state", "valid-state", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "pending")
			s.Jobs[i].State = "exploded"
		}},
		{"pending job with an attempt", "pending-has-no-attempt", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "running")
			s.Jobs[i].State = jobs.JobPending
		}},
		{"terminal job never closed", "closed-at", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "failed")
			s.Jobs[i].ClosedAt = time.Time{}
		}},
		{"retired key counted as held", "one-job-per-key", func(t *testing.T, s *invariant.Snapshot) {
			old, _ := retired(t, s)
			s.Jobs[old].ReplacedBy = ""
		}},
		{"key retired from a succeeded job", "retired-key", func(t *testing.T, s *invariant.Snapshot) {
			old, _ := retired(t, s)
			s.Jobs[old].State = jobs.JobSucceeded
		}},
		{"key retired for another intent", "retired-key", func(t *testing.T, s *invariant.Snapshot) {
			_, n := retired(t, s)
			s.Jobs[n].Fingerprint = "other"
		}},
		{"base version from the future", "base-version", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "running")
			as[0].BaseVersion = 99
			s.Attempts[s.Jobs[i].ID] = as
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := clone(healthy)
			tt.corrupt(t, s)
			got := s.Check()
			if !slices.ContainsFunc(got, func(v invariant.Violation) bool { return v.Rule == tt.rule }) {
				t.Errorf("rule %s did not fire; got %v", tt.rule, got)
			}
		})
	}
}

// TestCheckTransitionsCatchesChanges compares a snapshot with corrupted
// later versions of it.
func TestCheckTransitionsCatchesChanges(t *testing.T) {
	t.Parallel()
	before := healthySnapshot(t)
	if v := invariant.CheckTransitions(before, before); len(v) != 0 {
		t.Fatalf("unchanged snapshot reported: %v", v)
	}
	tests := []struct {
		name    string
		rule    string
		corrupt func(t *testing.T, s *invariant.Snapshot)
	}{
		{"terminal job reopened", "terminal-is-final", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "cancelled")
			s.Jobs[i].State = jobs.JobRunning
		}},
		{"result replaced", "terminal-is-final", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "succeeded")
			s.Jobs[i].Result = json.RawMessage(`{"other":1}`)
		}},
		{"terminal attempt changed", "terminal-is-final", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "failed")
			as[0].State = jobs.AttemptSucceeded
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"open job disappeared", "no-lost-job", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "pending")
			s.Jobs = slices.Delete(s.Jobs, i, i+1)
		}},
		{"attempt disappeared", "no-lost-attempt", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "running")
			s.Attempts[s.Jobs[i].ID] = nil
		}},
		{"running went back to starting", "legal-transition", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "running")
			as[0].State = jobs.AttemptStarting
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"provider reference replaced", "reference-is-final", func(t *testing.T, s *invariant.Snapshot) {
			i, as := find(t, s, "running")
			as[0].ProviderRef = "another"
			s.Attempts[s.Jobs[i].ID] = as
		}},
		{"retired key moved to another job", "retired-is-final", func(t *testing.T, s *invariant.Snapshot) {
			old, _ := retired(t, s)
			s.Jobs[old].ReplacedBy = "job_SOMEONE_ELSE"
		}},
		{"version went back", "version-grows", func(t *testing.T, s *invariant.Snapshot) {
			i, _ := find(t, s, "running")
			s.Jobs[i].Version = 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			after := clone(before)
			tt.corrupt(t, after)
			got := invariant.CheckTransitions(before, after)
			if !slices.ContainsFunc(got, func(v invariant.Violation) bool { return v.Rule == tt.rule }) {
				t.Errorf("rule %s did not fire; got %v", tt.rule, got)
			}
		})
	}
}
