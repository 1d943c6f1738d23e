package linearcheck

import (
	"fmt"
	"strings"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// matches reports whether the recorded answer of c is w.
func (w *answer) matches(c *call) bool { return w.differs(c, false) == "" }

// mismatch returns "" if the recorded answer of c is w, or says how it
// differs.
func (w *answer) mismatch(c *call) string { return w.differs(c, true) }

// differs returns "" if the recorded answer of c is w, or else, if
// explain, how it differs, and otherwise a word. Only what w sets is
// compared.
func (w *answer) differs(c *call, explain bool) string {
	op := c.op
	switch {
	case w.anyAnswer:
		return ""
	case w.refusal == nil && op.Outcome != history.OK:
		if !explain {
			return "differs"
		}
		return fmt.Sprintf("the store refused (%s)", errorText(op.Error))
	case w.refusal != nil && op.Outcome != history.Refused:
		return "the store succeeded"
	case w.refusal != nil:
		if d := w.refusal.mismatch(op.Error, explain); d != "" {
			return d
		}
	}
	r := &c.results
	var diffs []string
	if !explain {
		return w.differsQuickly(c)
	}
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

// mismatch returns "" if e is the refusal r, with the details r names;
// else, if explain, how it differs, and otherwise a word.
func (r *refusal) mismatch(e *history.Error, explain bool) string {
	if e == nil || e.Sentinel != r.sentinel {
		if !explain {
			return "differs"
		}
		return fmt.Sprintf("the store refused with %s", errorText(e))
	}
	if !explain && r.same(e) {
		return ""
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

// same reports whether e carries the details r names.
func (r *refusal) same(e *history.Error) bool {
	switch {
	case r.inFlight != nil:
		return e.InFlight != nil && *e.InFlight == *r.inFlight
	case r.jobClosed != nil:
		return e.JobClosed != nil && *e.JobClosed == *r.jobClosed
	case r.transition != nil:
		return e.Transition != nil && e.Transition.AttemptID == r.transition.AttemptID &&
			e.Transition.From == r.transition.From && e.Transition.To == r.transition.To
	case r.lostRace != nil:
		return e.LostRace != nil && *e.LostRace == *r.lostRace
	}
	return true
}

// differsQuickly is differs without the explanation, for the search.
func (w *answer) differsQuickly(c *call) string {
	r := &c.results
	const no = "differs"
	switch {
	case w.job != nil && (r.Job == nil || !sameJob(*w.job, *r.Job)),
		w.attempt != nil && (r.Attempt == nil || !sameAttempt(*w.attempt, *r.Attempt)),
		w.attemptsSet && len(r.Attempts) != len(w.attempts),
		w.created != nil && *w.created != r.Created,
		w.claimed != nil && *w.claimed != r.Claimed:
		return no
	}
	if w.attemptsSet {
		for i := range w.attempts {
			if !sameAttempt(w.attempts[i], r.Attempts[i]) {
				return no
			}
		}
	}
	if w.purged != nil && (r.Purged == nil || r.Purged.Jobs < w.purged.Jobs || r.Purged.Attempts < w.purged.Attempts) {
		return no
	}
	for _, l := range c.listedJobs {
		if want := w.listed[l.ID]; want == nil || !sameJob(*want, l) {
			return no
		}
	}
	for _, l := range c.listedAttempts {
		if want := w.listedA[l.ID]; want == nil || !sameAttempt(*want, l) {
			return no
		}
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
// times, which are the callers' (see the package documentation). JSON
// values are compared in normal form (normJSON): both jobs hold them so.
func diffJob(want, got jobs.Job) string {
	if sameJob(want, got) {
		return ""
	}
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
	field("Params", string(got.Params), string(want.Params))
	field("Fingerprint", got.Fingerprint, want.Fingerprint)
	field("State", got.State, want.State)
	field("Version", got.Version, want.Version)
	field("Attempts", got.Attempts, want.Attempts)
	field("Result", string(got.Result), string(want.Result))
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
	if sameAttempt(want, got) {
		return ""
	}
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

// sameJob reports whether the jobs agree on every field diffJob compares.
func sameJob(want, got jobs.Job) bool {
	return want.ID == got.ID && want.Owner == got.Owner && want.Key == got.Key && want.Kind == got.Kind &&
		want.Provider == got.Provider && string(want.Params) == string(got.Params) && want.Fingerprint == got.Fingerprint &&
		want.State == got.State && want.Version == got.Version && want.Attempts == got.Attempts &&
		string(want.Result) == string(got.Result) && want.CompletedBy == got.CompletedBy && want.Reason == got.Reason &&
		want.ReplacedBy == got.ReplacedBy
}

// sameAttempt reports whether the attempts agree on every field
// diffAttempt compares.
func sameAttempt(want, got jobs.Attempt) bool {
	return want.ID == got.ID && want.JobID == got.JobID && want.Seq == got.Seq && want.Provider == got.Provider &&
		want.State == got.State && want.BaseVersion == got.BaseVersion && want.Hedge == got.Hedge &&
		want.ProviderRef == got.ProviderRef && want.Reason == got.Reason
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
