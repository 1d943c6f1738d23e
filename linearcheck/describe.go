package linearcheck

import (
	"fmt"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// describeCall returns one line about the call: what it asked and what
// it was told. id renders IDs.
func describeCall(c *call, id func(string) string) string {
	return describeArgs(c, id) + " → " + describeAnswer(c, id)
}

func describeArgs(c *call, id func(string) string) string {
	op := c.op
	a := &op.Args
	var s string
	switch op.Method {
	case history.CreateJob, history.CreateJobTx:
		s = fmt.Sprintf("%s owner=%q key=%q kind=%s provider=%s", id(a.Job.ID), a.Job.Owner, a.Job.Key, a.Job.Kind, a.Job.Provider)
	case history.ReplaceJob:
		s = fmt.Sprintf("old %s from %v, new %s", id(a.Replacement.OldID), a.Replacement.From, id(a.Replacement.New.ID))
	case history.Job, history.Attempt:
		s = id(a.ID)
	case history.JobByKey:
		if key, by, ok := jobs.ParseRetiredKey(a.Key); ok {
			s = fmt.Sprintf("owner=%q key=%q retired for %s", a.Owner, key, id(by))
		} else {
			s = fmt.Sprintf("owner=%q key=%q", a.Owner, a.Key)
		}
	case history.Attempts:
		s = id(a.JobID)
	case history.CloseJob:
		s = fmt.Sprintf("%s to %s", id(a.Close.ID), a.Close.To)
		if a.Close.Reason != "" {
			s += fmt.Sprintf(" %q", a.Close.Reason)
		}
	case history.CreateAttempt:
		s = fmt.Sprintf("%s of %s", id(a.NewAttempt.ID), id(a.NewAttempt.JobID))
		if a.NewAttempt.Provider != "" {
			s += " on " + a.NewAttempt.Provider
		}
		if a.NewAttempt.Hedge {
			s += " hedge"
		}
	case history.UpdateAttempt:
		u := a.Update
		s = fmt.Sprintf("%s %v→%s", id(u.ID), u.From, u.To)
		if u.ProviderRef != "" {
			s += " ref=" + u.ProviderRef
		}
		if u.Reason != "" {
			s += fmt.Sprintf(" %q", u.Reason)
		}
		if u.ClaimToken != "" {
			s += " with claim " + id(u.ClaimToken)
		}
	case history.CompleteAttempt:
		s = fmt.Sprintf("%s result %s", id(a.Completion.AttemptID), a.Completion.Result)
		if a.Completion.ClaimToken != "" {
			s += " with claim " + id(a.Completion.ClaimToken)
		}
	case history.ClaimAttempt:
		cl := a.Claim
		s = fmt.Sprintf("%s as %s by %s at %s until %s", id(cl.ID), cl.State, id(cl.Token), clock(cl.At), clock(cl.Until))
	case history.RenewClaim:
		s = fmt.Sprintf("%s by %s until %s", id(a.Claim.ID), id(a.Claim.Token), clock(a.Claim.Until))
	case history.PurgeJobs:
		q := a.PurgeQuery
		s = fmt.Sprintf("before %s limit %d", clock(q.Before), q.Limit)
		if q.DryRun {
			s += " dry run"
		}
	case history.ListJobs:
		s = "… (its jobs here)"
	case history.StaleAttempts:
		s = "… (its attempts here)"
	}
	return string(op.Method) + "(" + s + ")"
}

func describeAnswer(c *call, id func(string) string) string {
	op := c.op
	var parts []string
	switch {
	case !op.Returned:
		return "no return (its process died): ambiguous"
	case op.Outcome == history.OK:
		parts = append(parts, "ok")
	case op.Outcome == history.Refused:
		parts = append(parts, "refused "+refusalText(op.Error, id))
	default:
		parts = append(parts, "ambiguous: "+errorText(op.Error))
	}
	if op.Method == history.CreateJobTx && op.Outcome != history.Ambiguous {
		parts[0] += " (in the caller's transaction, which may not commit: ambiguous)"
	}
	r := &op.Results
	if r.Job != nil {
		j := describeJob(*r.Job, id)
		if op.Method == history.CreateJob || op.Method == history.CreateJobTx || op.Method == history.ReplaceJob {
			if r.Created {
				j = "created " + j
			} else {
				j = "found " + j
			}
		}
		parts = append(parts, j)
	}
	if r.Attempt != nil {
		parts = append(parts, describeAttempt(*r.Attempt, id))
	}
	if op.Method == history.Attempts {
		var as []string
		for _, a := range r.Attempts {
			as = append(as, describeAttempt(a, id))
		}
		parts = append(parts, "["+strings.Join(as, ", ")+"]")
	}
	switch op.Method {
	case history.ClaimAttempt, history.RenewClaim:
		parts = append(parts, fmt.Sprintf("claimed=%t", r.Claimed))
	case history.PurgeJobs:
		n := jobs.PurgeCount{}
		if r.Purged != nil {
			n = *r.Purged
		}
		parts = append(parts, fmt.Sprintf("%d jobs, %d attempts (in all partitions)", n.Jobs, n.Attempts))
	case history.ListJobs:
		for _, j := range c.listedJobs {
			parts = append(parts, describeJob(j, id))
		}
	case history.StaleAttempts:
		for _, a := range c.listedAttempts {
			parts = append(parts, describeAttempt(a, id))
		}
	}
	return strings.Join(parts, "; ")
}

func describeJob(j jobs.Job, id func(string) string) string {
	s := fmt.Sprintf("%s %s v%d", id(j.ID), j.State, j.Version)
	if j.Attempts > 0 {
		s += fmt.Sprintf(" %d attempts", j.Attempts)
	}
	if j.CompletedBy != "" {
		s += fmt.Sprintf(" won by %s result %s", id(j.CompletedBy), j.Result)
	}
	if j.ReplacedBy != "" {
		s += " key retired for " + id(j.ReplacedBy)
	}
	return s
}

func describeAttempt(a jobs.Attempt, id func(string) string) string {
	s := fmt.Sprintf("%s %s", id(a.ID), a.State)
	if a.Hedge {
		s += " hedge"
	}
	if a.ProviderRef != "" {
		s += " ref=" + a.ProviderRef
	}
	if a.State.Terminal() && a.Reason != "" {
		s += fmt.Sprintf(" %q", a.Reason)
	}
	return s
}

func refusalText(e *history.Error, id func(string) string) string {
	if e == nil {
		return "(no error recorded)"
	}
	switch {
	case e.InFlight != nil:
		return fmt.Sprintf("%s (attempt %s %s)", e.Sentinel, id(e.InFlight.AttemptID), e.InFlight.State)
	case e.JobClosed != nil:
		return fmt.Sprintf("%s (job %s %s)", e.Sentinel, id(e.JobClosed.JobID), e.JobClosed.State)
	case e.Transition != nil:
		return fmt.Sprintf("%s (%s from %s to %s)", e.Sentinel, id(e.Transition.AttemptID), e.Transition.From, e.Transition.To)
	case e.LostRace != nil:
		return fmt.Sprintf("%s (winner %s)", e.Sentinel, id(e.LostRace.WinnerID))
	}
	return e.Sentinel
}

// describeWant returns what the specification's answer w says.
func describeWant(w *answer, id func(string) string) string {
	var parts []string
	switch {
	case w.anyAnswer:
		return "any answer"
	case w.refusal != nil:
		r := *w.refusal
		parts = append(parts, "refused "+r.String())
	default:
		parts = append(parts, "ok")
	}
	if w.job != nil {
		parts = append(parts, describeJob(*w.job, id))
	}
	if w.attempt != nil {
		parts = append(parts, describeAttempt(*w.attempt, id))
	}
	if w.attemptsSet {
		var as []string
		for _, a := range w.attempts {
			as = append(as, describeAttempt(a, id))
		}
		parts = append(parts, "["+strings.Join(as, ", ")+"]")
	}
	if w.created != nil {
		parts = append(parts, fmt.Sprintf("created=%t", *w.created))
	}
	if w.claimed != nil {
		parts = append(parts, fmt.Sprintf("claimed=%t", *w.claimed))
	}
	if w.purged != nil {
		parts = append(parts, fmt.Sprintf("deleting %d jobs here", w.purged.Jobs))
	}
	return strings.Join(parts, "; ")
}

// clock renders a time of a call's arguments, to the microsecond.
func clock(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.UTC().Format("15:04:05.000000")
}
