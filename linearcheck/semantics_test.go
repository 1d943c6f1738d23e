package linearcheck_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
	"github.com/intentjobs/jobs/linearcheck"
)

// Histories written by hand, each a few operations, that pin down what
// the checker accepts: above all, that an ambiguous operation may have
// taken effect or not, at any moment after its call, and that a call
// without a return is ambiguous.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	jobID = "job_J1"
	attA  = "att_A1"
	attB  = "att_B1"
)

func newJob(id string) jobs.Job {
	return jobs.Job{ID: id, Owner: "o", Key: "k", Kind: "charge", Provider: "p", Params: json.RawMessage(`{"n":1}`),
		Fingerprint: "fp", State: jobs.JobPending, Version: 1, CreatedAt: t0}
}

// stored returns the job as a store returns it in state st at version v.
func stored(st jobs.JobState, v int64, attempts int, winner string) *jobs.Job {
	j := newJob(jobID)
	j.State, j.Version, j.Attempts, j.CompletedBy = st, v, attempts, winner
	if winner != "" {
		j.Result = json.RawMessage(`{"r":1}`)
	}
	return &j
}

func att(id string, seq int, st jobs.AttemptState, base int64) *jobs.Attempt {
	return &jobs.Attempt{ID: id, JobID: jobID, Seq: seq, Provider: "p", State: st, BaseVersion: base}
}

// op returns a call of client from call to ret (ret 0: never returned).
func op(client string, m history.Method, args history.Args, call, ret int64, out history.Outcome, res history.Results, e *history.Error) history.Op {
	return history.Op{Process: "p1", Client: client, Method: m, Args: args, Call: call, Returned: ret != 0, Return: ret,
		Outcome: out, Results: res, Error: e}
}

// prefix is a job created and an attempt A started, by one client, from
// time 1 to 4.
func prefix() []history.Op {
	j := newJob(jobID)
	return []history.Op{
		op("c1", history.CreateJob, history.Args{Job: &j}, 1, 2, history.OK, history.Results{Job: stored(jobs.JobPending, 1, 0, ""), Created: true}, nil),
		op("c1", history.CreateAttempt, history.Args{NewAttempt: &jobs.NewAttempt{ID: attA, JobID: jobID, At: t0}}, 3, 4, history.OK,
			history.Results{Attempt: att(attA, 1, jobs.AttemptStarting, 1)}, nil),
	}
}

func complete(client string, id string, call, ret int64, out history.Outcome, res history.Results, e *history.Error) history.Op {
	return op(client, history.CompleteAttempt, history.Args{Completion: &jobs.Completion{AttemptID: id, Result: json.RawMessage(`{"r":1}`), At: t0}},
		call, ret, out, res, e)
}

func read(client string, call, ret int64, j *jobs.Job) history.Op {
	return op(client, history.Job, history.Args{ID: jobID}, call, ret, history.OK, history.Results{Job: j}, nil)
}

var timeout = &history.Error{Message: "timeout", Sentinel: "ErrStorage", Storage: &jobs.StorageError{Op: "complete", Kind: jobs.StorageUnavailable}}

func TestSemantics(t *testing.T) {
	t.Parallel()
	won := history.Results{Job: stored(jobs.JobSucceeded, 2, 1, attA), Attempt: att(attA, 1, jobs.AttemptSucceeded, 1)}
	running := stored(jobs.JobRunning, 1, 1, "")
	succeeded := stored(jobs.JobSucceeded, 2, 1, attA)
	newA := func(id string, call, ret int64, out history.Outcome, res history.Results, e *history.Error) history.Op {
		return op("c3", history.CreateAttempt, history.Args{NewAttempt: &jobs.NewAttempt{ID: id, JobID: jobID, Hedge: true, At: t0}},
			call, ret, out, res, e)
	}
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want linearcheck.Verdict
	}{
		{"a completion, then a read of its result", append(prefix(),
			complete("c1", attA, 5, 6, history.OK, won, nil),
			read("c2", 7, 8, succeeded)), linearcheck.Linearizable},
		{"a read of a result before it was offered", append(prefix(),
			read("c2", 5, 6, succeeded),
			complete("c1", attA, 7, 8, history.OK, won, nil)), linearcheck.NotLinearizable},
		{"an ambiguous completion that took effect after a later read", append(prefix(),
			complete("c1", attA, 5, 6, history.Ambiguous, history.Results{}, timeout),
			read("c2", 7, 8, running),
			read("c2", 9, 10, succeeded)), linearcheck.Linearizable},
		{"an ambiguous completion that never took effect", append(prefix(),
			complete("c1", attA, 5, 6, history.Ambiguous, history.Results{}, timeout),
			read("c2", 7, 8, running),
			read("c2", 9, 10, running)), linearcheck.Linearizable},
		{"an ambiguous completion cannot be undone", append(prefix(),
			complete("c1", attA, 5, 6, history.Ambiguous, history.Results{}, timeout),
			read("c2", 7, 8, succeeded),
			read("c2", 9, 10, running)), linearcheck.NotLinearizable},
		{"a completion whose process died before it returned took effect", append(prefix(),
			complete("c1", attA, 5, 0, history.Ambiguous, history.Results{}, nil),
			read("c2", 7, 8, succeeded)), linearcheck.Linearizable},
		{"without the call that died, the result comes from nowhere", append(prefix(),
			read("c2", 7, 8, succeeded)), linearcheck.NotLinearizable},
		{"an ambiguous attempt that took effect after a later one", lateAttempt(history.Ambiguous), linearcheck.Linearizable},
		{"the same attempt, returned: it cannot have taken effect so late", lateAttempt(history.OK), linearcheck.NotLinearizable},
		{"two attempts that both won", twoWins(true), linearcheck.NotLinearizable},
		{"two attempts, the first to finish won", twoWins(false), linearcheck.Linearizable},
		{"a refusal that names another blocking attempt", append(prefix(),
			newA(attB, 5, 6, history.Refused, history.Results{}, &history.Error{Sentinel: "ErrAttemptInFlight",
				InFlight: &jobs.AttemptInFlightError{JobID: jobID, AttemptID: "att_Z9", State: jobs.AttemptStarting}})), linearcheck.NotLinearizable},
		{"a closed job with an attempt in doubt refuses an attempt as closed", closedInDoubt(&history.Error{Sentinel: "ErrJobClosed",
			JobClosed: &jobs.JobClosedError{JobID: jobID, State: jobs.JobCancelled}}), linearcheck.Linearizable},
		{"or as blocked by the attempt in doubt", closedInDoubt(&history.Error{Sentinel: "ErrAttemptInFlight",
			InFlight: &jobs.AttemptInFlightError{JobID: jobID, AttemptID: attA, State: jobs.AttemptStarting}}), linearcheck.Linearizable},
		{"but not as blocked by an attempt that is not", closedInDoubt(&history.Error{Sentinel: "ErrAttemptInFlight",
			InFlight: &jobs.AttemptInFlightError{JobID: jobID, AttemptID: attA, State: jobs.AttemptUnknown}}), linearcheck.NotLinearizable},
		{"two creates of one key that both created", []history.Op{
			op("c1", history.CreateJob, history.Args{Job: ptrJob(newJob(jobID))}, 1, 3, history.OK, history.Results{Job: stored(jobs.JobPending, 1, 0, ""), Created: true}, nil),
			op("c2", history.CreateJob, history.Args{Job: ptrJob(newJob("job_J2"))}, 2, 4, history.OK, history.Results{Job: func() *jobs.Job {
				j := newJob("job_J2")
				return &j
			}(), Created: true}, nil),
		}, linearcheck.NotLinearizable},
		{"a read of a job nobody created", []history.Op{read("c1", 1, 2, running)}, linearcheck.NotLinearizable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history.History{Dir: tc.name, Ops: slices.Clone(tc.ops)}
			for i := range h.Ops {
				h.Ops[i].Seq = int64(i + 1)
			}
			res := linearcheck.Check(h)
			if res.Verdict != tc.want {
				t.Errorf("%s; want %s\n%s", res.Verdict, tc.want, res.Report())
			}
		})
	}
}

func ptrJob(j jobs.Job) *jobs.Job { return &j }

// lateAttempt: A runs; B, a hedge, is called from 7 to 8 with the
// outcome given; C, a hedge, starts from 9 to 10 (so B was not stored
// then: it would have blocked C, being in doubt) and runs from 11 to 12;
// a read from 13 to 14 finds B third. B took effect after C ran, after
// its return: possible only if B is ambiguous.
func lateAttempt(b history.Outcome) []history.Op {
	hedge := func(id string, seq int, st jobs.AttemptState) *jobs.Attempt {
		a := att(id, seq, st, 1)
		a.Hedge = true
		return a
	}
	start := func(id string, call, ret int64, out history.Outcome, res history.Results) history.Op {
		return op("c3", history.CreateAttempt, history.Args{NewAttempt: &jobs.NewAttempt{ID: id, JobID: jobID, Hedge: true, At: t0}},
			call, ret, out, res, nil)
	}
	run := func(id string, call, ret int64, res *jobs.Attempt) history.Op {
		return op("c2", history.UpdateAttempt, history.Args{Update: &jobs.AttemptUpdate{ID: id, From: []jobs.AttemptState{jobs.AttemptStarting},
			To: jobs.AttemptRunning, At: t0}}, call, ret, history.OK, history.Results{Attempt: res}, nil)
	}
	var bAnswer history.Results
	if b == history.OK {
		bAnswer = history.Results{Attempt: hedge(attB, 3, jobs.AttemptStarting)}
	}
	bOp := start(attB, 7, 8, b, bAnswer)
	if b == history.Ambiguous {
		bOp.Error = timeout
	}
	return append(prefix(),
		run(attA, 5, 6, att(attA, 1, jobs.AttemptRunning, 1)),
		bOp,
		start("att_C1", 9, 10, history.OK, history.Results{Attempt: hedge("att_C1", 2, jobs.AttemptStarting)}),
		run("att_C1", 11, 12, hedge("att_C1", 2, jobs.AttemptRunning)),
		op("c2", history.Attempts, history.Args{JobID: jobID}, 13, 14, history.OK, history.Results{Attempts: []jobs.Attempt{
			*att(attA, 1, jobs.AttemptRunning, 1), *hedge("att_C1", 2, jobs.AttemptRunning), *hedge(attB, 3, jobs.AttemptStarting),
		}}, nil))
}

// twoWins: A runs, B (a hedge) runs, both complete, and B, which
// finishes first, wins; A is told it won too, or that it lost.
func twoWins(both bool) []history.Op {
	b := att(attB, 2, jobs.AttemptRunning, 1)
	b.Hedge = true
	bStarting := *b
	bStarting.State = jobs.AttemptStarting
	bWon := *b
	bWon.State = jobs.AttemptSucceeded
	update := func(id string, call, ret int64, res *jobs.Attempt) history.Op {
		return op("c1", history.UpdateAttempt, history.Args{Update: &jobs.AttemptUpdate{ID: id, From: []jobs.AttemptState{jobs.AttemptStarting},
			To: jobs.AttemptRunning, At: t0}}, call, ret, history.OK, history.Results{Attempt: res}, nil)
	}
	jobB := stored(jobs.JobSucceeded, 2, 2, attB)
	jobA := stored(jobs.JobSucceeded, 2, 2, attA)
	completeA := complete("c1", attA, 11, 14, history.OK, history.Results{Job: jobA, Attempt: att(attA, 1, jobs.AttemptSucceeded, 1)}, nil)
	if !both {
		lost := att(attA, 1, jobs.AttemptLost, 1)
		lost.Reason = jobs.DroppedReason(*jobB)
		completeA = complete("c1", attA, 11, 14, history.Refused, history.Results{Job: jobB, Attempt: lost},
			&history.Error{Sentinel: "ErrLostRace", LostRace: &jobs.LostRaceError{JobID: jobID, AttemptID: attA, WinnerID: attB}})
	}
	return append(prefix(),
		update(attA, 5, 6, att(attA, 1, jobs.AttemptRunning, 1)),
		op("c1", history.CreateAttempt, history.Args{NewAttempt: &jobs.NewAttempt{ID: attB, JobID: jobID, Hedge: true, At: t0}},
			7, 8, history.OK, history.Results{Attempt: &bStarting}, nil),
		update(attB, 9, 10, b),
		completeA,
		complete("c2", attB, 12, 13, history.OK, history.Results{Job: jobB, Attempt: &bWon}, nil))
}

// closedInDoubt: the job is cancelled while A is starting, and a new
// attempt is refused with e. The contract orders neither refusal before
// the other.
func closedInDoubt(e *history.Error) []history.Op {
	cancelled := stored(jobs.JobCancelled, 2, 1, "")
	return append(prefix(),
		op("c1", history.CloseJob, history.Args{Close: &jobs.JobClose{ID: jobID, To: jobs.JobCancelled, At: t0}}, 5, 6, history.OK,
			history.Results{Job: cancelled}, nil),
		op("c2", history.CreateAttempt, history.Args{NewAttempt: &jobs.NewAttempt{ID: attB, JobID: jobID, At: t0}}, 7, 8, history.Refused,
			history.Results{}, e))
}
