package linearcheck

import (
	"github.com/intentjobs/jobs/history"
)

// Patching: before a history is checked, an ambiguous call that creates a
// job or an attempt gets a return time when a later definite answer shows
// that what it creates exists. Unpatched, an ambiguous call returns at the
// end of time: it overlaps every call after it, and the search must try it
// at every point of its partition, which is what makes a partition with
// many ambiguous calls (a failover that fails hundreds of calls at once)
// too long to decide.
//
// Why it changes no verdict. Let w be an ambiguous call that creates the
// job or attempt X (CreateJob, CreateJobTx, ReplaceJob's new job,
// CreateAttempt), and the only call of the history that creates X (IDs are
// unique, and a second call creating X disables the patch for X). Let r
// be a definite call, checked in X's partition, whose answer the
// specification gives only in a state where X exists (an answer it
// compares: see existenceShown). In the specification, X exists only
// after the step of a call that creates it, so in every order that
// explains the history, w took effect before r, and r before r returned:
// w's step lies in [w.Call, r.Return]. Giving w that return time removes
// only orders that explain nothing, so the patched history is
// linearizable exactly when the original is. The bound is the earliest
// such return. When r was called before w was (the answer shows X before
// anyone asked for it), no order explains the history, and w is left
// unpatched for the check to report it.
//
// What is not patched, and why: an ambiguous call whose effect no answer
// names (an attempt created but never seen still counts in its job's
// Attempts, and an update's effect may be another call's), and reads
// (left out already: see ambiguousOp).

// returnBounds returns, for the index in h.Ops of each ambiguous call that
// can be patched, its patched return time.
func returnBounds(h *history.History, skipped func(i int) bool) map[int]int64 {
	creators := map[string][]int{}
	for i := range h.Ops {
		for _, id := range createdBy(&h.Ops[i]) {
			creators[id] = append(creators[id], i)
		}
	}
	bounds := map[int]int64{}
	for i := range h.Ops {
		r := &h.Ops[i]
		if ambiguousOp(r) || skipped(i) {
			continue
		}
		for _, id := range existenceShown(r) {
			ws := creators[id]
			if len(ws) != 1 || ws[0] == i {
				continue
			}
			w := &h.Ops[ws[0]]
			if !ambiguousOp(w) || w.Call >= r.Return {
				continue
			}
			if b, ok := bounds[ws[0]]; !ok || r.Return < b {
				bounds[ws[0]] = r.Return
			}
		}
	}
	return bounds
}

// createdBy returns the IDs of the jobs and attempts op creates if it
// takes effect.
func createdBy(op *history.Op) []string {
	a := &op.Args
	switch {
	case (op.Method == history.CreateJob || op.Method == history.CreateJobTx) && a.Job != nil:
		return []string{a.Job.ID}
	case op.Method == history.ReplaceJob && a.Replacement != nil:
		return []string{a.Replacement.New.ID}
	case op.Method == history.CreateAttempt && a.NewAttempt != nil:
		return []string{a.NewAttempt.ID}
	}
	return nil
}

// existenceShown returns the IDs of the jobs and attempts whose existence
// the definite answer of op shows, where the specification compares it,
// so that no state without them explains the answer:
//
//   - a call on one job or attempt that did not answer ErrNotFound or
//     ErrInvalidInput (the specification answers ErrNotFound for a
//     missing one, after checking the input alone): Job, Attempt,
//     Attempts, CloseJob, CreateAttempt (its job), UpdateAttempt,
//     CompleteAttempt, RecordLookup;
//   - a job that Job, JobByKey, or a CreateJob or ReplaceJob that created
//     nothing returned (the holder of the key);
//   - the attempts Attempts returned, the jobs ListJobs returned, the
//     attempts StaleAttempts and ListAttempts returned (each compared
//     with the stored one, in its partition).
//
// ClaimAttempt and RenewClaim are not used: they answer false, not
// ErrNotFound, for a missing attempt.
func existenceShown(op *history.Op) []string {
	a, r := &op.Args, &op.Results
	var ids []string
	definite := op.Outcome == history.OK ||
		(op.Outcome == history.Refused && op.Error != nil && op.Error.Sentinel != "ErrNotFound" && op.Error.Sentinel != "ErrInvalidInput")
	if definite {
		switch op.Method {
		case history.Job, history.Attempt:
			ids = append(ids, a.ID)
		case history.Attempts:
			ids = append(ids, a.JobID)
		case history.CloseJob:
			ids = append(ids, a.Close.ID)
		case history.CreateAttempt:
			ids = append(ids, a.NewAttempt.JobID)
		case history.UpdateAttempt:
			ids = append(ids, a.Update.ID)
		case history.CompleteAttempt:
			ids = append(ids, a.Completion.AttemptID)
		case history.RecordLookup:
			ids = append(ids, a.Lookup.AttemptID)
		}
	}
	if op.Outcome != history.OK {
		return ids
	}
	switch op.Method {
	case history.Job, history.JobByKey:
		if r.Job != nil {
			ids = append(ids, r.Job.ID)
		}
	case history.CreateJob, history.ReplaceJob:
		if r.Job != nil && !r.Created {
			ids = append(ids, r.Job.ID)
		}
	case history.Attempts, history.StaleAttempts, history.ListAttempts:
		for _, at := range r.Attempts {
			ids = append(ids, at.ID)
		}
	case history.ListJobs:
		for _, j := range r.Jobs {
			ids = append(ids, j.ID)
		}
	}
	return ids
}
