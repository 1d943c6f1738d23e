package linearcheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// A partition holds the operations on every job ever created under one
// owner and key, and on their attempts: the store's invariants never
// relate two such sets, so the history is linearizable if each partition
// is (PurgeJobs and the lists aside: see the package documentation).
// Operations naming a job or attempt that no recorded call created form a
// partition of their own, whose state is empty.

// keyPartition names the partition of an owner and key.
func keyPartition(owner, key string) string { return fmt.Sprintf("owner %q key %q", owner, key) }

func orphanJob(id string) string     { return fmt.Sprintf("job %s, never created", id) }
func orphanAttempt(id string) string { return fmt.Sprintf("attempt %s, never created", id) }

// Reasons an operation is left out of the check.
const (
	skipUnmodelled    = "not modelled (verifications, NotifyClosed, CountJobs, ReconcileStates)"
	skipAmbiguousRead = "ambiguous read (no effect, answer unknown)"
	skipNoArgs        = "arguments not recorded"
	skipNoPurge       = "purge that deleted nothing"
	skipUnseenCreate  = "ambiguous create of a job no other operation names"
)

// partitioned is a history split into partitions.
type partitioned struct {
	names   []string // sorted
	calls   map[string][]*call
	skipped map[string]int
	clients []string // process/client, indexed by porcupine's ClientId
	// bounds are the patched return times of ambiguous calls, by index
	// in the history's Ops (see returnBounds).
	bounds map[int]int64
}

// reads are the methods that write nothing.
var reads = map[history.Method]bool{history.Job: true, history.JobByKey: true, history.Attempt: true,
	history.Attempts: true, history.ListJobs: true, history.StaleAttempts: true, history.ListAttempts: true,
	history.CountJobs: true, history.ReconcileStates: true}

// ambiguousOp reports whether op's effect and answer are unknown: it did
// not return, or returned an ambiguous error, or it is CreateJobTx, whose
// job exists only if the caller's transaction commits, which the history
// does not say.
func ambiguousOp(op *history.Op) bool {
	return !op.Returned || op.Outcome == history.Ambiguous || op.Method == history.CreateJobTx
}

// partition splits h. Every ID is chosen by the caller before the store
// is called, so every operation's partition follows from the arguments:
// a job's from the CreateJob (or ReplaceJob) that named it, an attempt's
// from the CreateAttempt that named it.
func partition(h *history.History) *partitioned {
	p := &partitioned{calls: map[string][]*call{}, skipped: map[string]int{}}
	jobPart := map[string]string{}
	for i := range h.Ops {
		op := &h.Ops[i]
		switch {
		case op.Args.Job != nil && (op.Method == history.CreateJob || op.Method == history.CreateJobTx):
			setOnce(jobPart, op.Args.Job.ID, keyPartition(op.Args.Job.Owner, op.Args.Job.Key))
		case op.Args.Replacement != nil:
			n := op.Args.Replacement.New
			setOnce(jobPart, n.ID, keyPartition(n.Owner, n.Key))
		}
	}
	ofJob := func(id string) string {
		if name, ok := jobPart[id]; ok {
			return name
		}
		return orphanJob(id)
	}
	attemptPart := map[string]string{}
	for i := range h.Ops {
		if na := h.Ops[i].Args.NewAttempt; na != nil {
			setOnce(attemptPart, na.ID, ofJob(na.JobID))
		}
	}
	ofAttempt := func(id string) string {
		if name, ok := attemptPart[id]; ok {
			return name
		}
		return orphanAttempt(id)
	}
	p.bounds = returnBounds(h, func(i int) bool { return h.Ops[i].ArgsError != "" || !hasArgs(&h.Ops[i]) })
	named := jobsNamed(h)
	clients := map[string]int{}
	var purges []*history.Op
	var purgeIndexes []int
	for i := range h.Ops {
		op := &h.Ops[i]
		amb := ambiguousOp(op)
		switch {
		case op.ArgsError != "" || !hasArgs(op):
			p.skipped[skipNoArgs]++
			continue
		case op.Method == history.RecordVerification || op.Method == history.Verifications || op.Method == history.NotifyClosed,
			op.Method == history.CountJobs || op.Method == history.ReconcileStates:
			// CountJobs counts every partition at once, and ReconcileStates
			// reads the lookups, which nothing else reads: both write
			// nothing, and leaving a read out can hide a violation but
			// never report one.
			p.skipped[skipUnmodelled]++
			continue
		case amb && (reads[op.Method] || op.Method == history.RecordLookup):
			// RecordLookup writes only the lookup, which no modelled
			// answer shows: taking effect or not, it leaves the state
			// the checker models as it was.
			p.skipped[skipAmbiguousRead]++
			continue
		case amb && newJob(op) != "" && named[newJob(op)] == 0:
			// Had it taken effect, the job would hold the key: whatever
			// touched the key after it would name the job. Nothing does,
			// so it took effect after everything, or never, which is one.
			p.skipped[skipUnseenCreate]++
			continue
		}
		client := op.Process + "/" + op.Client
		if _, ok := clients[client]; !ok {
			clients[client] = len(p.clients)
			p.clients = append(p.clients, client)
		}
		args, results, bad := normalize(op)
		add := func(name string, c *call) {
			c.index, c.op, c.partition, c.ambiguous = i, op, name, amb
			c.args, c.results, c.badJSON = args, results, bad
			p.calls[name] = append(p.calls[name], c)
		}
		a := &op.Args
		switch op.Method {
		case history.CreateJob, history.CreateJobTx:
			add(keyPartition(a.Job.Owner, a.Job.Key), &call{})
		case history.ReplaceJob:
			add(keyPartition(a.Replacement.New.Owner, a.Replacement.New.Key), &call{})
		case history.Job:
			add(ofJob(a.ID), &call{})
		case history.JobByKey:
			key := a.Key
			if k, _, ok := jobs.ParseRetiredKey(key); ok {
				key = k
			}
			add(keyPartition(a.Owner, key), &call{})
		case history.Attempts:
			add(ofJob(a.JobID), &call{})
		case history.CloseJob:
			add(ofJob(a.Close.ID), &call{})
		case history.CreateAttempt:
			add(ofJob(a.NewAttempt.JobID), &call{})
		case history.Attempt:
			add(ofAttempt(a.ID), &call{})
		case history.UpdateAttempt:
			add(ofAttempt(a.Update.ID), &call{})
		case history.CompleteAttempt:
			add(ofAttempt(a.Completion.AttemptID), &call{})
		case history.ClaimAttempt, history.RenewClaim:
			add(ofAttempt(a.Claim.ID), &call{})
		case history.RecordLookup:
			add(ofAttempt(a.Lookup.AttemptID), &call{})
		case history.ListJobs:
			// One read per partition of the jobs it returned: each is
			// checked as the state of its partition at one moment of the
			// call. What it left out (limits, filters) is not checked.
			by := map[string][]jobs.Job{}
			for _, j := range op.Results.Jobs {
				name := ofJob(j.ID)
				by[name] = append(by[name], normalJob(j))
			}
			for _, name := range slices.Sorted(maps.Keys(by)) {
				add(name, &call{listedJobs: by[name]})
			}
		case history.StaleAttempts, history.ListAttempts:
			// As ListJobs: each attempt listed is checked against its
			// partition's state at one moment of the call.
			by := map[string][]jobs.Attempt{}
			for _, at := range op.Results.Attempts {
				name := ofAttempt(at.ID)
				by[name] = append(by[name], at)
			}
			for _, name := range slices.Sorted(maps.Keys(by)) {
				add(name, &call{listedAttempts: by[name]})
			}
		case history.PurgeJobs:
			q := a.PurgeQuery
			if !amb && (q.DryRun || q.Limit <= 0 || op.Outcome == history.Refused || op.Results.Purged == nil || op.Results.Purged.Jobs == 0) {
				// It deleted nothing, anywhere: a step that changes no
				// state and whose answer any state allows.
				p.skipped[skipNoPurge]++
				continue
			}
			purges, purgeIndexes = append(purges, op), append(purgeIndexes, i)
		default:
			p.skipped[skipUnmodelled]++
		}
	}
	// A purge may delete jobs of every partition: it is an operation of
	// each partition of an owner and key.
	for name := range p.calls {
		if !strings.HasPrefix(name, "owner ") {
			continue
		}
		for k, op := range purges {
			p.calls[name] = append(p.calls[name], &call{index: purgeIndexes[k], op: op, partition: name, ambiguous: ambiguousOp(op),
				args: op.Args, results: op.Results})
		}
	}
	p.names = slices.Sorted(maps.Keys(p.calls))
	for _, name := range p.names {
		slices.SortStableFunc(p.calls[name], func(a, b *call) int { return a.index - b.index })
	}
	return p
}

// normalize returns op's arguments and results with their JSON values in
// normal form (normJSON): copies, op is left as it is; and whether one of
// the arguments' JSON values is not JSON.
func normalize(op *history.Op) (history.Args, history.Results, bool) {
	a, r := op.Args, op.Results
	bad := false
	for _, raw := range [][]byte{jobParams(a.Job), jobParams(replacementJob(a.Replacement)), completionResult(a.Completion)} {
		bad = bad || (raw != nil && !json.Valid(raw))
	}
	if a.Job != nil {
		a.Job = ptr(normalJob(*a.Job))
	}
	if a.Replacement != nil {
		rep := *a.Replacement
		rep.New = normalJob(rep.New)
		a.Replacement = &rep
	}
	if a.Completion != nil {
		c := *a.Completion
		c.Result = normal(c.Result)
		a.Completion = &c
	}
	if r.Job != nil {
		r.Job = ptr(normalJob(*r.Job))
	}
	return a, r, bad
}

func jobParams(j *jobs.Job) []byte {
	if j == nil {
		return nil
	}
	return j.Params
}

func replacementJob(r *jobs.JobReplacement) *jobs.Job {
	if r == nil {
		return nil
	}
	return &r.New
}

func completionResult(c *jobs.Completion) []byte {
	if c == nil {
		return nil
	}
	return c.Result
}

func normalJob(j jobs.Job) jobs.Job {
	j.Params, j.Result = normal(j.Params), normal(j.Result)
	return j
}

// normal returns raw in normal form, nil for nothing or null: a history
// records a nil json.RawMessage as null, so the two are one.
func normal(raw json.RawMessage) json.RawMessage {
	if n := normJSON(raw); n != "" && n != "null" {
		return json.RawMessage(n)
	}
	return nil
}

// hasArgs reports whether op has the arguments its method needs.
func hasArgs(op *history.Op) bool {
	a := &op.Args
	switch op.Method {
	case history.CreateJob, history.CreateJobTx:
		return a.Job != nil
	case history.ReplaceJob:
		return a.Replacement != nil
	case history.CloseJob:
		return a.Close != nil
	case history.CreateAttempt:
		return a.NewAttempt != nil
	case history.UpdateAttempt:
		return a.Update != nil
	case history.CompleteAttempt:
		return a.Completion != nil
	case history.ClaimAttempt, history.RenewClaim:
		return a.Claim != nil
	case history.PurgeJobs:
		return a.PurgeQuery != nil
	case history.RecordLookup:
		return a.Lookup != nil
	case history.ListAttempts:
		return a.AttemptQuery != nil
	}
	return true
}

// newJob returns the ID of the job op creates: CreateJob's, CreateJobTx's
// or ReplaceJob's new one; "" for other methods.
func newJob(op *history.Op) string {
	switch {
	case op.Args.Job != nil && (op.Method == history.CreateJob || op.Method == history.CreateJobTx):
		return op.Args.Job.ID
	case op.Args.Replacement != nil:
		return op.Args.Replacement.New.ID
	}
	return ""
}

// jobsNamed counts, for each job ID, the operations that name it other
// than by creating it: in their arguments, results or errors.
func jobsNamed(h *history.History) map[string]int {
	count := map[string]int{}
	for i := range h.Ops {
		op := &h.Ops[i]
		seen := map[string]bool{}
		name := func(ids ...string) {
			for _, id := range ids {
				if id != "" && !seen[id] {
					seen[id] = true
					count[id]++
				}
			}
		}
		a, r, e := &op.Args, &op.Results, op.Error
		name(a.ID, a.JobID)
		if a.Replacement != nil {
			name(a.Replacement.OldID)
		}
		if _, by, ok := jobs.ParseRetiredKey(a.Key); ok {
			name(by)
		}
		if a.Close != nil {
			name(a.Close.ID)
		}
		if a.NewAttempt != nil {
			name(a.NewAttempt.JobID)
		}
		if r.Job != nil && (r.Job.ID != newJob(op) || !r.Created) {
			name(r.Job.ID, r.Job.ReplacedBy)
		}
		if r.Attempt != nil {
			name(r.Attempt.JobID)
		}
		for _, at := range r.Attempts {
			name(at.JobID)
		}
		for _, j := range r.Jobs {
			name(j.ID, j.ReplacedBy)
		}
		if e != nil {
			for _, d := range []any{e.InFlight, e.JobClosed, e.LostRace, e.KeyConflict} {
				switch d := d.(type) {
				case *jobs.AttemptInFlightError:
					if d != nil {
						name(d.JobID)
					}
				case *jobs.JobClosedError:
					if d != nil {
						name(d.JobID)
					}
				case *jobs.LostRaceError:
					if d != nil {
						name(d.JobID)
					}
				case *jobs.KeyConflictError:
					if d != nil {
						name(d.JobID)
					}
				}
			}
		}
	}
	return count
}

func setOnce(m map[string]string, id, name string) {
	if _, ok := m[id]; !ok {
		m[id] = name
	}
}

// operations returns the partition's calls as porcupine's operations. An
// ambiguous call returns at the end of time (it may take effect at any
// moment after its call), or at its patched return time.
func (p *partitioned) operations(name string) []porcupine.Operation {
	clients := map[string]int{}
	for i, c := range p.clients {
		clients[c] = i
	}
	var ops []porcupine.Operation
	for _, c := range p.calls[name] {
		ret := c.op.Return
		if c.ambiguous {
			ret = math.MaxInt64
			if b, ok := p.bounds[c.index]; ok {
				ret = b
			}
		}
		ops = append(ops, porcupine.Operation{ClientId: clients[c.op.Process+"/"+c.op.Client], Input: c, Output: c,
			Call: c.op.Call, Return: ret})
	}
	return ops
}
