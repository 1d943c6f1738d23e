// Package invariant checks that a jobs.Store holds what the package's
// invariants allow, by reading everything in it: one job per owner and key,
// one winner per job and that winner one of its own succeeded attempts, no
// late result stored, at most one attempt in doubt, no open attempt on a
// failed job, and the bookkeeping that goes with them (see Snapshot.Check
// for the full list). CheckTransitions compares two readings of one store
// and reports what moved in a way the state machines forbid.
//
// Run it after a test that drove a store hard, through faults
// (package faultstore), kills or races:
//
//	violations, err := invariant.Check(ctx, store)
//	for _, v := range violations {
//		t.Errorf("invariant violated: %s", v)
//	}
//
// Operators run the same check on a database with `jobsctl check`.
//
// A Snapshot is read page by page through JobLister.ListJobs and Store.Attempts,
// not in one transaction, so Check is meant for a store whose writers have
// stopped: a job written to between the read of its row and the read of its
// attempts can look inconsistent. CheckTransitions looks at each job and
// attempt on its own, and so also serves to compare snapshots taken one
// after another while writers run.
package invariant

import (
	"context"
	"fmt"
	"sort"

	"github.com/intentjobs/jobs"
)

// Violation is one broken invariant.
type Violation struct {
	Rule   string // short name, e.g. "one-job-per-key"
	JobID  string
	Detail string
}

// String formats v as "rule: job ID: detail".
func (v Violation) String() string {
	return fmt.Sprintf("%s: job %s: %s", v.Rule, v.JobID, v.Detail)
}

// Snapshot is everything a store holds: its jobs in ID order, and each
// job's attempts.
type Snapshot struct {
	Jobs     []jobs.Job
	Attempts map[string][]jobs.Attempt // by job ID
}

// Store is what the checks read: a store that can list its jobs.
type Store interface {
	jobs.Store
	jobs.JobLister
}

// TakeSnapshot reads every job and attempt of s.
func TakeSnapshot(ctx context.Context, s Store) (*Snapshot, error) {
	snap := &Snapshot{Attempts: map[string][]jobs.Attempt{}}
	after := ""
	for {
		page, err := s.ListJobs(ctx, jobs.JobQuery{After: after, Limit: 500})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			as, err := s.Attempts(ctx, j.ID)
			if err != nil {
				return nil, err
			}
			snap.Attempts[j.ID] = as
		}
		snap.Jobs = append(snap.Jobs, page...)
		after = page[len(page)-1].ID
	}
	return snap, nil
}

// Check reads s (see TakeSnapshot) and reports every violation of the
// invariants found in it (see Snapshot.Check). An empty result means none.
func Check(ctx context.Context, s Store) ([]Violation, error) {
	snap, err := TakeSnapshot(ctx, s)
	if err != nil {
		return nil, err
	}
	return snap.Check(), nil
}

// Check reports the violations within one snapshot:
//   - more than one job per (owner, key), leaving out the jobs whose key
//     was retired (ReplacedBy set), which hold it no more;
//   - a retired key on a job that is not failed or cancelled, or whose
//     replacing job, if still stored, has another owner, key or
//     fingerprint, or was created before it;
//   - a retired key on a job with an attempt that may still act (starting,
//     running or unknown) or did act (its result dropped): the intent
//     could run twice;
//   - a job whose completed_by is not one of its own succeeded attempts, or a
//     succeeded job without a winner and a result, or a result on a job that
//     did not succeed (a late result stored);
//   - more than one succeeded attempt per job;
//   - more than one attempt starting or unknown at once, or an open attempt
//     created after an in-doubt one (an attempt started past one in doubt);
//   - an open attempt on a job that was given up (failed);
//   - a lost attempt on a job that no other attempt completed;
//   - attempts on a pending job, or a job whose attempt count is not its
//     number of attempts, or an attempt filed under another job;
//   - an attempt whose base version is newer than its job's version, or a
//     terminal job still at version 1;
//   - a close time on an open job or none on a terminal one, and the same
//     for attempts' finish times;
//   - unknown states, and attempt numbers that are not 1, 2, 3, ….
func (snap *Snapshot) Check() []Violation {
	var out []Violation
	add := func(rule, jobID, format string, args ...any) {
		out = append(out, Violation{Rule: rule, JobID: jobID, Detail: fmt.Sprintf(format, args...)})
	}
	byKey := map[[2]string]string{}
	byID := map[string]jobs.Job{}
	for _, j := range snap.Jobs {
		byID[j.ID] = j
	}
	for _, j := range snap.Jobs {
		if j.ReplacedBy != "" {
			// A retired key: the job keeps its original Key, and no longer
			// holds it.
			if j.State != jobs.JobFailed && j.State != jobs.JobCancelled {
				add("retired-key", j.ID, "job is %s but its key was taken over by job %s", j.State, j.ReplacedBy)
			}
			if n, ok := byID[j.ReplacedBy]; ok && (n.Owner != j.Owner || n.Key != j.Key || n.Fingerprint != j.Fingerprint || n.CreatedAt.Before(j.CreatedAt)) {
				add("retired-key", j.ID, "replaced by job %s, which is not the same intent under the same key, created later", n.ID)
			}
		} else {
			k := [2]string{j.Owner, j.Key}
			if other, dup := byKey[k]; dup {
				add("one-job-per-key", j.ID, "same owner and key as job %s", other)
			}
			byKey[k] = j.ID
		}
		if !j.State.Valid() {
			add("valid-state", j.ID, "unknown job state %q", j.State)
		}
		as := snap.Attempts[j.ID]
		sort.Slice(as, func(a, b int) bool { return as[a].Seq < as[b].Seq })
		if j.Attempts != len(as) {
			add("attempt-count", j.ID, "attempt count is %d but %d attempts are stored", j.Attempts, len(as))
		}
		if j.State == jobs.JobPending && len(as) > 0 {
			add("pending-has-no-attempt", j.ID, "job is pending with %d attempts", len(as))
		}
		if j.State.Terminal() != !j.ClosedAt.IsZero() {
			add("closed-at", j.ID, "job is %s with closed_at %v", j.State, j.ClosedAt)
		}
		if j.State.Terminal() && j.Version < 2 {
			add("version-grows", j.ID, "job is %s at version %d", j.State, j.Version)
		}
		var succeeded []string
		inDoubt := 0
		for i, a := range as {
			if a.JobID != j.ID {
				add("attempt-job", j.ID, "attempt %s names job %s", a.ID, a.JobID)
			}
			if a.BaseVersion > j.Version {
				add("base-version", j.ID, "attempt %s has base version %d, newer than the job's %d", a.ID, a.BaseVersion, j.Version)
			}
			if a.State.Terminal() != !a.FinishedAt.IsZero() {
				add("finished-at", j.ID, "attempt %s is %s with finished_at %v", a.ID, a.State, a.FinishedAt)
			}
			if a.State == jobs.AttemptLost && (j.CompletedBy == "" || j.CompletedBy == a.ID) {
				add("lost-to-a-winner", j.ID, "attempt %s is lost but no other attempt completed the job", a.ID)
			}
			if a.Seq != i+1 {
				add("attempt-seq", j.ID, "attempt %s has seq %d, want %d", a.ID, a.Seq, i+1)
			}
			if !a.State.Valid() {
				add("valid-state", j.ID, "attempt %s has unknown state %q", a.ID, a.State)
			}
			if a.State == jobs.AttemptSucceeded {
				succeeded = append(succeeded, a.ID)
			}
			if a.State.InDoubt() {
				inDoubt++
			}
			if j.State == jobs.JobFailed && a.State.Open() {
				add("failed-job-idle", j.ID, "job failed while attempt %s is %s", a.ID, a.State)
			}
			if j.ReplacedBy != "" && (a.State.Open() || a.ResultDropped()) {
				// Attempts of a retired job never open again, so this
				// holds from the moment the key moved on.
				how := string(a.State)
				if a.ResultDropped() {
					how += " with its result dropped"
				}
				add("key-freed-while-acting", j.ID, "key taken over by job %s while attempt %s is %s", j.ReplacedBy, a.ID, how)
			}
		}
		if len(succeeded) > 1 {
			add("one-winner", j.ID, "%d succeeded attempts: %v", len(succeeded), succeeded)
		}
		if inDoubt > 1 {
			add("one-in-doubt", j.ID, "%d attempts starting or unknown at once", inDoubt)
		}
		switch {
		case j.State == jobs.JobSucceeded:
			if j.CompletedBy == "" || j.Result == nil {
				add("winner-result", j.ID, "succeeded without a winner or a result")
			} else if len(succeeded) != 1 || succeeded[0] != j.CompletedBy {
				add("winner-is-attempt", j.ID, "completed_by %s is not its one succeeded attempt (succeeded: %v)", j.CompletedBy, succeeded)
			}
		default:
			if j.CompletedBy != "" || j.Result != nil {
				add("no-late-result", j.ID, "job is %s but holds a result or a winner (%s)", j.State, j.CompletedBy)
			}
			if len(succeeded) > 0 {
				add("winner-is-attempt", j.ID, "job is %s but attempts %v succeeded", j.State, succeeded)
			}
		}
	}
	return out
}

// CheckTransitions compares two snapshots of the same store, before and
// after, and reports terminal jobs and attempts whose state or outcome
// changed, provider references and retired keys (Job.ReplacedBy) that
// changed once recorded, and jobs or
// attempts that disappeared without being terminal. (Terminal jobs may
// disappear: retention purges them.)
func CheckTransitions(before, after *Snapshot) []Violation {
	var out []Violation
	later := map[string]jobs.Job{}
	for _, j := range after.Jobs {
		later[j.ID] = j
	}
	laterAttempts := map[string]jobs.Attempt{}
	for _, as := range after.Attempts {
		for _, a := range as {
			laterAttempts[a.ID] = a
		}
	}
	for _, j := range before.Jobs {
		n, ok := later[j.ID]
		switch {
		case !ok && !j.State.Terminal():
			out = append(out, Violation{"no-lost-job", j.ID, fmt.Sprintf("open job (%s) disappeared", j.State)})
		case ok && j.State.Terminal() && (n.State != j.State || n.CompletedBy != j.CompletedBy || string(n.Result) != string(j.Result) || n.Version != j.Version):
			out = append(out, Violation{"terminal-is-final", j.ID, fmt.Sprintf("terminal job changed: %s/v%d -> %s/v%d", j.State, j.Version, n.State, n.Version)})
		case ok && n.Version < j.Version:
			out = append(out, Violation{"version-grows", j.ID, fmt.Sprintf("version went back from %d to %d", j.Version, n.Version)})
		case ok && j.ReplacedBy != "" && n.ReplacedBy != j.ReplacedBy:
			out = append(out, Violation{"retired-is-final", j.ID, fmt.Sprintf("key retired for job %s, now %q", j.ReplacedBy, n.ReplacedBy)})
		}
		if !ok {
			continue
		}
		for _, a := range before.Attempts[j.ID] {
			na, ok := laterAttempts[a.ID]
			switch {
			case !ok:
				out = append(out, Violation{"no-lost-attempt", j.ID, fmt.Sprintf("attempt %s disappeared while its job stayed", a.ID)})
			case a.State.Terminal() && na.State != a.State:
				out = append(out, Violation{"terminal-is-final", j.ID, fmt.Sprintf("attempt %s changed from %s to %s", a.ID, a.State, na.State)})
			case !a.State.Terminal() && na.State != a.State && !a.State.CanMoveTo(na.State) && !(a.State == jobs.AttemptStarting && na.State.Terminal()):
				out = append(out, Violation{"legal-transition", j.ID, fmt.Sprintf("attempt %s moved from %s to %s", a.ID, a.State, na.State)})
			}
			if ok && a.ProviderRef != "" && na.ProviderRef != a.ProviderRef {
				out = append(out, Violation{"reference-is-final", j.ID, fmt.Sprintf("attempt %s's provider reference changed from %q to %q", a.ID, a.ProviderRef, na.ProviderRef)})
			}
		}
	}
	return out
}
