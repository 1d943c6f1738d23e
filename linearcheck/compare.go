package linearcheck

import (
	"fmt"
	"strings"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// mismatch returns "" if the recorded answer of c is w, or says how it
// differs. Only what w sets is compared.
func (w *answer) mismatch(c *call) string {
	op := c.op
	switch {
	case w.anyAnswer:
		return ""
	case w.refusal == nil && op.Outcome != history.OK:
		return fmt.Sprintf("the store refused (%s)", errorText(op.Error))
	case w.refusal != nil && op.Outcome != history.Refused:
		return "the store succeeded"
	case w.refusal != nil:
		if d := w.refusal.mismatch(op.Error); d != "" {
			return d
		}
	}
	r := &op.Results
	var diffs []string
	if w.job != nil {
		if r.Job == nil {
			diffs = append(diffs, "no job returned; want "+jobText(*w.job))
		} else if d := diffJob(*w.job, *r.Job); d != "" {
			diffs = append(diffs, "job "+d)
		}
	}
	if w.attempt != nil {
		if r.Attempt == nil {
			diffs = append(diffs, "no attempt returned; want "+attemptText(*w.attempt))
		} else if d := diffAttempt(*w.attempt, *r.Attempt); d != "" {
			diffs = append(diffs, "attempt "+d)
		}
	}
	if w.attemptsSet {
		if len(r.Attempts) != len(w.attempts) {
			diffs = append(diffs, fmt.Sprintf("%d attempts returned; want %d", len(r.Attempts), len(w.attempts)))
		} else {
			for i := range w.attempts {
				if d := diffAttempt(w.attempts[i], r.Attempts[i]); d != "" {
					diffs = append(diffs, fmt.Sprintf("attempt #%d %s", i+1, d))
				}
			}
		}
	}
	if w.created != nil && *w.created != r.Created {
		diffs = append(diffs, fmt.Sprintf("created = %t; want %t", r.Created, *w.created))
	}
	if w.claimed != nil && *w.claimed != r.Claimed {
		diffs = append(diffs, fmt.Sprintf("claimed = %t; want %t", r.Claimed, *w.claimed))
	}
	if w.purged != nil {
		got := jobs.PurgeCount{}
		if r.Purged != nil {
			got = *r.Purged
		}
		if got.Jobs < w.purged.Jobs || got.Attempts < w.purged.Attempts {
			diffs = append(diffs, fmt.Sprintf("purged %d jobs and %d attempts in all; the jobs deleted here alone are %d with %d attempts",
				got.Jobs, got.Attempts, w.purged.Jobs, w.purged.Attempts))
		}
	}
	for _, l := range c.listedJobs {
		switch want := w.listed[l.ID]; {
		case want == nil:
			diffs = append(diffs, "listed job "+l.ID+", which is not stored")
		default:
			if d := diffJob(*want, l); d != "" {
				diffs = append(diffs, "listed job "+d)
			}
		}
	}
	for _, l := range c.listedAttempts {
		switch want := w.listedA[l.ID]; {
		case want == nil:
			diffs = append(diffs, "listed attempt "+l.ID+", which is not stored")
		default:
			if d := diffAttempt(*want, l); d != "" {
				diffs = append(diffs, "listed attempt "+d)
			}
		}
	}
	return strings.Join(diffs, "; ")
}

// mismatch returns "" if e is the refusal r, with the details r names.
func (r *refusal) mismatch(e *history.Error) string {
	if e == nil || e.Sentinel != r.sentinel {
		return fmt.Sprintf("the store refused with %s", errorText(e))
	}
	var d []string
	field := func(name, got, want string) {
		if got != want {
			d = append(d, fmt.Sprintf("%s %s; want %s", name, orNone(got), orNone(want)))
		}
	}
	switch {
	case r.inFlight != nil:
		if e.InFlight == nil {
			return "refused with ErrAttemptInFlight but not an *AttemptInFlightError"
		}
		field("JobID", e.InFlight.JobID, r.inFlight.JobID)
		field("AttemptID", e.InFlight.AttemptID, r.inFlight.AttemptID)
		field("State", string(e.InFlight.State), string(r.inFlight.State))
	case r.jobClosed != nil:
		if e.JobClosed == nil {
			return "refused with ErrJobClosed but not a *JobClosedError"
		}
		field("JobID", e.JobClosed.JobID, r.jobClosed.JobID)
		field("State", string(e.JobClosed.State), string(r.jobClosed.State))
	case r.transition != nil:
		if e.Transition == nil {
			return "refused with ErrInvalidTransition but not a *TransitionError"
		}
		field("AttemptID", e.Transition.AttemptID, r.transition.AttemptID)
		field("From", string(e.Transition.From), string(r.transition.From))
		field("To", string(e.Transition.To), string(r.transition.To))
	case r.lostRace != nil:
		if e.LostRace == nil {
			return "refused with ErrLostRace but not a *LostRaceError"
		}
		field("JobID", e.LostRace.JobID, r.lostRace.JobID)
		field("AttemptID", e.LostRace.AttemptID, r.lostRace.AttemptID)
		field("WinnerID", e.LostRace.WinnerID, r.lostRace.WinnerID)
	}
	if len(d) > 0 {
		return r.sentinel + ": " + strings.Join(d, ", ")
	}
	return ""
}

func (r *refusal) String() string {
	switch {
	case r.inFlight != nil:
		return fmt.Sprintf("ErrAttemptInFlight (attempt %s %s)", r.inFlight.AttemptID, r.inFlight.State)
	case r.jobClosed != nil:
		return fmt.Sprintf("ErrJobClosed (job %s %s)", r.jobClosed.JobID, r.jobClosed.State)
	case r.transition != nil:
		return fmt.Sprintf("ErrInvalidTransition (%s from %s to %s)", r.transition.AttemptID, r.transition.From, r.transition.To)
	case r.lostRace != nil:
		return fmt.Sprintf("ErrLostRace (winner %s)", r.lostRace.WinnerID)
	}
	return r.sentinel
}

// diffJob compares the fields of a job that the contract decides: not its
// times, which are the callers' (see the package documentation).
func diffJob(want, got jobs.Job) string {
	var d []string
	field := func(name string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			d = append(d, fmt.Sprintf("%s %s; want %s", name, orNone(fmt.Sprint(g)), orNone(fmt.Sprint(w))))
		}
	}
	field("ID", got.ID, want.ID)
	field("Owner", got.Owner, want.Owner)
	field("Key", got.Key, want.Key)
	field("Kind", got.Kind, want.Kind)
	field("Provider", got.Provider, want.Provider)
	field("Params", normJSON(got.Params), normJSON(want.Params))
	field("Fingerprint", got.Fingerprint, want.Fingerprint)
	field("State", got.State, want.State)
	field("Version", got.Version, want.Version)
	field("Attempts", got.Attempts, want.Attempts)
	field("Result", normJSON(got.Result), normJSON(want.Result))
	field("CompletedBy", got.CompletedBy, want.CompletedBy)
	field("Reason", got.Reason, want.Reason)
	field("ReplacedBy", got.ReplacedBy, want.ReplacedBy)
	if len(d) == 0 {
		return ""
	}
	return want.ID + ": " + strings.Join(d, ", ")
}

// diffAttempt compares the fields of an attempt that the contract
// decides: not its times.
func diffAttempt(want, got jobs.Attempt) string {
	var d []string
	field := func(name string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			d = append(d, fmt.Sprintf("%s %s; want %s", name, orNone(fmt.Sprint(g)), orNone(fmt.Sprint(w))))
		}
	}
	field("ID", got.ID, want.ID)
	field("JobID", got.JobID, want.JobID)
	field("Seq", got.Seq, want.Seq)
	field("Provider", got.Provider, want.Provider)
	field("State", got.State, want.State)
	field("BaseVersion", got.BaseVersion, want.BaseVersion)
	field("Hedge", got.Hedge, want.Hedge)
	field("ProviderRef", got.ProviderRef, want.ProviderRef)
	field("Reason", got.Reason, want.Reason)
	if len(d) == 0 {
		return ""
	}
	return want.ID + ": " + strings.Join(d, ", ")
}

func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func errorText(e *history.Error) string {
	switch {
	case e == nil:
		return "no error"
	case e.Sentinel != "":
		return e.Sentinel + ": " + e.Message
	}
	return e.Message
}

func jobText(j jobs.Job) string {
	s := fmt.Sprintf("%s %s v%d", j.ID, j.State, j.Version)
	if j.CompletedBy != "" {
		s += " won by " + j.CompletedBy
	}
	return s
}

func attemptText(a jobs.Attempt) string { return fmt.Sprintf("%s %s", a.ID, a.State) }
