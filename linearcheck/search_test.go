package linearcheck

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/memstore"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func testJob(id string) jobs.Job {
	return jobs.Job{ID: id, Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`),
		Fingerprint: "f", State: jobs.JobPending, Version: 1, CreatedAt: t0, UpdatedAt: t0}
}

// recordSequentially runs calls one after the other on a recorded
// memstore, so that every answer is a real one, and returns the history;
// the test then sets the times it wants.
func recordSequentially(t *testing.T, calls func(ctx context.Context, s jobs.Store)) *history.History {
	t.Helper()
	dir := t.TempDir()
	sink, err := history.NewSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls(context.Background(), history.Record(memstore.New(), sink, "c"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// overlappingReads: a job created, then a cancel called first and n reads
// of the key, half answered before the cancel and half after, all
// overlapping one long stall. Placing the cancel first fails, and so does
// every subset of the reads before it but the right one: a search without
// the rule for calls that leave the state as it is tries them all.
func overlappingReads(t *testing.T, n int, corrupt bool) *history.History {
	h := recordSequentially(t, func(ctx context.Context, s jobs.Store) {
		if _, _, err := s.CreateJob(ctx, testJob("job_1")); err != nil {
			t.Fatal(err)
		}
		for range n / 2 {
			s.JobByKey(ctx, "o", "k")
		}
		if _, err := s.CloseJob(ctx, jobs.JobClose{ID: "job_1", To: jobs.JobCancelled, Reason: "stop", At: t0}); err != nil {
			t.Fatal(err)
		}
		for range n / 2 {
			s.JobByKey(ctx, "o", "k")
		}
	})
	for i := range h.Ops {
		op := &h.Ops[i]
		switch op.Method {
		case history.CreateJob:
			op.Call, op.Return = 0, 1
		case history.CloseJob:
			op.Call, op.Return = 2, 100
		default:
			op.Call, op.Return = 3, 100
		}
	}
	if corrupt {
		last := &h.Ops[len(h.Ops)-1]
		last.Results.Job.State = jobs.JobSucceeded // a state the job never had
	}
	return h
}

func TestWitnessDecidesOverlappingReads(t *testing.T) {
	t.Parallel()
	res := Options{Timeout: time.Minute}.Check(overlappingReads(t, 60, false))
	if !res.Ok() {
		t.Fatalf("60 reads around a cancel: %s", res.Report())
	}
	t.Log(res.Summary())
}

func TestWitnessLeavesViolationsToPorcupine(t *testing.T) {
	t.Parallel()
	res := Options{Timeout: time.Minute}.Check(overlappingReads(t, 8, true))
	if res.Verdict != NotLinearizable || len(res.Violations) != 1 {
		t.Fatalf("a read of a state the job never had: %s", res.Report())
	}
}

// TestValidWitness: an order is believed only if it respects real time
// and every step is the specification's.
func TestValidWitness(t *testing.T) {
	t.Parallel()
	h := overlappingReads(t, 2, false)
	p := partition(h)
	ops := p.operations(p.names[0])
	if len(ops) != 4 {
		t.Fatalf("%d operations", len(ops))
	}
	// ops: create, read (pending), close, read (cancelled).
	replay := func(seq []int) []*state {
		var states []*state
		s := emptyState
		for _, i := range seq {
			c := ops[i].Input.(*call)
			if outs := step(s, c, c); len(outs) > 0 {
				s = outs[0].(*state)
			}
			states = append(states, s)
		}
		return states
	}
	for _, tc := range []struct {
		name string
		seq  []int
		want bool
	}{
		{"the order", []int{0, 1, 2, 3}, true},
		{"a read before the create it follows", []int{1, 0, 2, 3}, false},
		{"a read answered pending after the cancel", []int{0, 2, 1, 3}, false},
		{"a call twice", []int{0, 1, 2, 2}, false},
		{"a call left out", []int{0, 1, 2}, false},
	} {
		if got := validWitness(ops, tc.seq, replay(tc.seq)); got != tc.want {
			t.Errorf("%s: validWitness = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestReturnBounds: an ambiguous create gets the return of the first
// later answer that shows what it created, and only then.
func TestReturnBounds(t *testing.T) {
	t.Parallel()
	h := recordSequentially(t, func(ctx context.Context, s jobs.Store) {
		s.CreateJob(ctx, testJob("job_1"))                                         // 0: made ambiguous
		s.Attempt(ctx, "att_1")                                                    // 1: ErrNotFound, before the create
		s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_1", JobID: "job_1", At: t0}) // 2: made ambiguous
		s.Attempts(ctx, "job_1")                                                   // 3: shows att_1 and job_1
		s.Job(ctx, "job_1")                                                        // 4: shows job_1, returns first
		s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_2", JobID: "job_1", At: t0}) // 5: refused, made ambiguous
		s.Attempt(ctx, "att_2")                                                    // 6: ErrNotFound
	})
	times := [][2]int64{{10, 20}, {12, 15}, {30, 40}, {50, 70}, {45, 60}, {80, 90}, {85, 95}}
	if len(h.Ops) != len(times) {
		t.Fatalf("%d operations", len(h.Ops))
	}
	for i := range h.Ops {
		h.Ops[i].Call, h.Ops[i].Return = times[i][0], times[i][1]
	}
	for _, i := range []int{0, 2, 5} {
		h.Ops[i].Outcome = history.Ambiguous
		h.Ops[i].Error = &history.Error{Message: "timeout", Sentinel: "ErrStorage"}
	}
	got := returnBounds(h, func(int) bool { return false })
	want := map[int]int64{0: 60, 2: 70}
	if len(got) != len(want) || got[0] != want[0] || got[2] != want[2] {
		t.Errorf("returnBounds = %v, want %v", got, want)
	}
	if res := Check(h); !res.Ok() || res.Patched != 2 {
		t.Errorf("patched: %s", res.Report())
	}

	// Two calls creating one ID: no bound.
	h.Ops[5].Args.NewAttempt = &jobs.NewAttempt{ID: "att_1", JobID: "job_1", At: t0}
	if got := returnBounds(h, func(int) bool { return false }); got[2] != 0 {
		t.Errorf("att_1 created by two calls: bound %d, want none", got[2])
	}
	if !errors.Is(h.Ops[1].Error.Err(), jobs.ErrNotFound) {
		t.Fatalf("op 1: %v", h.Ops[1].Error)
	}
}
