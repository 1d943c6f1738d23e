package linearcheck

import (
	"slices"
	"sync/atomic"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/history"
)

// call is one operation as the checker sees it, in one partition: the
// recorded operation, and, for a list that spans partitions, the part of
// its answer in this partition.
type call struct {
	index     int // in the history's Ops
	op        *history.Op
	partition string
	ambiguous bool // its effect and answer are unknown: see ambiguousOp

	// args and results are the operation's, with every JSON value in
	// normal form (normJSON), so that the specification compares them as
	// strings.
	args    history.Args
	results history.Results
	// badJSON is set when a JSON value of the arguments is not JSON.
	badJSON bool

	listedJobs     []jobs.Job     // ListJobs: the jobs of this partition it returned
	listedAttempts []jobs.Attempt // StaleAttempts: the attempts of this partition it returned

	// overflow is set when a purge found more purgeable jobs here than
	// maxPurgeable: the specification then let it delete fewer subsets
	// of them than the contract allows, and a violation found is not one.
	overflow atomic.Bool
}

// answer is what the specification says a call returns. A field left nil
// is not compared.
type answer struct {
	refusal  *refusal // nil: the call succeeds
	job      *jobs.Job
	attempt  *jobs.Attempt
	attempts []jobs.Attempt // Attempts (compared when attemptsSet)
	created  *bool
	claimed  *bool

	attemptsSet bool
	listed      map[string]*jobs.Job     // ListJobs: by ID, nil if not stored
	listedA     map[string]*jobs.Attempt // StaleAttempts: by ID, nil if not stored
	anyAnswer   bool                     // any definite answer (a purge that deleted nothing here)
	purged      *jobs.PurgeCount         // PurgeJobs: the answer counts at least these
}

// refusal is a typed refusal of the contract, with the details compared.
type refusal struct {
	sentinel   string // as history.Error.Sentinel
	inFlight   *jobs.AttemptInFlightError
	jobClosed  *jobs.JobClosedError
	transition *jobs.TransitionError
	lostRace   *jobs.LostRaceError
}

// outcome is one way a call may go: the state after it, and its answer.
type outcome struct {
	next *state
	want answer
}

func ptr[T any](v T) *T { return &v }

func refuse(sentinel string) answer { return answer{refusal: &refusal{sentinel: sentinel}} }

// spec returns every way the call c may go in state s: the sequential
// specification of the Store contract (package jobs, store.go), one
// method at a time. Most calls have one way; a refusal naming one of
// several blocking attempts, a comparison of times that the store's
// precision decides, and a purge have several.
func spec(s *state, c *call) []outcome {
	op := c.op
	a := &c.args
	switch op.Method {
	case history.CreateJob, history.CreateJobTx:
		return createJob(s, *a.Job, c.badJSON)
	case history.ReplaceJob:
		return replaceJob(s, *a.Replacement, c.badJSON)
	case history.Job:
		return readJob(s, s.jobIndex(a.ID))
	case history.JobByKey:
		if _, by, ok := jobs.ParseRetiredKey(a.Key); ok {
			return readJob(s, s.retired(by))
		}
		return readJob(s, s.holder())
	case history.CloseJob:
		return closeJob(s, *a.Close)
	case history.Attempt:
		ji, ai := s.attemptIndex(a.ID)
		if ji < 0 {
			return []outcome{{s, refuse("ErrNotFound")}}
		}
		return []outcome{{s, answer{attempt: ptr(s.jobs[ji].Attempts[ai].view(s.jobs[ji].ID))}}}
	case history.Attempts:
		ji := s.jobIndex(a.JobID)
		if ji < 0 {
			return []outcome{{s, refuse("ErrNotFound")}}
		}
		j := &s.jobs[ji]
		as := make([]jobs.Attempt, len(j.Attempts))
		for i := range j.Attempts {
			as[i] = j.Attempts[i].view(j.ID)
		}
		return []outcome{{s, answer{attempts: as, attemptsSet: true}}}
	case history.CreateAttempt:
		return createAttempt(s, *a.NewAttempt)
	case history.UpdateAttempt:
		return updateAttempt(s, *a.Update)
	case history.CompleteAttempt:
		return completeAttempt(s, *a.Completion, c.badJSON)
	case history.ClaimAttempt:
		return claimAttempt(s, *a.Claim)
	case history.RenewClaim:
		return renewClaim(s, *a.Claim)
	case history.PurgeJobs:
		return purgeJobs(s, *a.PurgeQuery, c)
	case history.ListJobs:
		w := answer{listed: map[string]*jobs.Job{}}
		for _, l := range c.listedJobs {
			if ji := s.jobIndex(l.ID); ji >= 0 {
				w.listed[l.ID] = ptr(s.jobs[ji].view())
			} else {
				w.listed[l.ID] = nil
			}
		}
		return []outcome{{s, w}}
	case history.RecordLookup:
		// It records the lookup, which the model does not hold (no
		// modelled answer shows it), and refuses a lookup of no attempt.
		if a.Lookup.Check() != nil {
			return []outcome{{s, refuse("ErrInvalidInput")}}
		}
		if ji, _ := s.attemptIndex(a.Lookup.AttemptID); ji < 0 {
			return []outcome{{s, refuse("ErrNotFound")}}
		}
		return []outcome{{s, answer{}}}
	case history.StaleAttempts, history.ListAttempts:
		w := answer{listedA: map[string]*jobs.Attempt{}}
		for _, l := range c.listedAttempts {
			if ji, ai := s.attemptIndex(l.ID); ji >= 0 {
				w.listedA[l.ID] = ptr(s.jobs[ji].Attempts[ai].view(s.jobs[ji].ID))
			} else {
				w.listedA[l.ID] = nil
			}
		}
		return []outcome{{s, w}}
	}
	panic("linearcheck: no specification for " + string(op.Method))
}

func readJob(s *state, ji int) []outcome {
	if ji < 0 {
		return []outcome{{s, refuse("ErrNotFound")}}
	}
	return []outcome{{s, answer{job: ptr(s.jobs[ji].view())}}}
}

// createJob: at most one job per owner and key; a later call gets the job
// that holds the key, and writes nothing.
func createJob(s *state, j jobs.Job, badJSON bool) []outcome {
	if badJSON {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	if h := s.holder(); h >= 0 {
		return []outcome{{s, answer{job: ptr(s.jobs[h].view()), created: ptr(false)}}}
	}
	if s.jobIndex(j.ID) >= 0 {
		return []outcome{{s, refuse("ErrInvalidInput")}} // the ID is taken
	}
	n := job{ID: j.ID, Owner: j.Owner, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Fingerprint: j.Fingerprint,
		Params: string(j.Params), State: jobs.JobPending, Version: 1, CreatedAt: nanos(j.CreatedAt), ClosedAt: noTime}
	next := s.adding(n)
	return []outcome{{next, answer{job: ptr(n.view()), created: ptr(true)}}}
}

// replaceJob: the key of r.OldID is retired, and r.New created under it,
// in one step, if the old job holds the key, is in one of r.From, and has
// no attempt that may still act (refused, naming it) or whose result was
// dropped; otherwise it is CreateJob(r.New).
func replaceJob(s *state, r jobs.JobReplacement, badJSON bool) []outcome {
	if r.Check() != nil || badJSON {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	h := s.holder()
	if h < 0 || s.jobs[h].ID != r.OldID || !slices.Contains(r.From, s.jobs[h].State) {
		return createJob(s, r.New, false)
	}
	old := &s.jobs[h]
	if blockers := inFlight(s, h, false); len(blockers) > 0 {
		return blockers
	}
	for i := range old.Attempts {
		if old.Attempts[i].view(old.ID).ResultDropped() {
			return createJob(s, r.New, false)
		}
	}
	if s.jobIndex(r.New.ID) >= 0 {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	retired := s.with(h, func(j *job) { j.ReplacedBy = r.New.ID })
	return createJob(retired, r.New, false)
}

// inFlight returns the refusals naming an attempt of the job at ji that
// blocks a new attempt, giving the job up, or retiring its key: one that
// is starting or unknown, or running unless hedge. The contract lets the
// store name any of them (the SQL stores and memstore name one in doubt
// first). None if nothing blocks.
func inFlight(s *state, ji int, hedge bool) []outcome {
	j := &s.jobs[ji]
	var out []outcome
	for _, a := range j.Attempts {
		if a.State.InDoubt() || (a.State == jobs.AttemptRunning && !hedge) {
			out = append(out, outcome{s, answer{refusal: &refusal{sentinel: "ErrAttemptInFlight",
				inFlight: &jobs.AttemptInFlightError{JobID: j.ID, AttemptID: a.ID, State: a.State}}}})
		}
	}
	return out
}

// jobClosed is the refusal of a terminal job at ji.
func jobClosed(s *state, ji int) outcome {
	j := &s.jobs[ji]
	return outcome{s, answer{refusal: &refusal{sentinel: "ErrJobClosed", jobClosed: &jobs.JobClosedError{JobID: j.ID, State: j.State}}}}
}

// closeJob: an open job becomes failed or cancelled; giving up is refused
// while an attempt is open; a terminal job is refused. The contract names
// no order between the two refusals: where both hold (giving up a
// cancelled job whose attempt is still open), either is its answer.
func closeJob(s *state, c jobs.JobClose) []outcome {
	if c.Check() != nil {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	ji := s.jobIndex(c.ID)
	if ji < 0 {
		return []outcome{{s, refuse("ErrNotFound")}}
	}
	j := &s.jobs[ji]
	var refusals []outcome
	if j.State.Terminal() {
		refusals = append(refusals, jobClosed(s, ji))
	}
	if c.To == jobs.JobFailed {
		refusals = append(refusals, inFlight(s, ji, false)...)
	}
	if len(refusals) > 0 {
		return refusals
	}
	next := s.with(ji, func(j *job) {
		j.State, j.Version, j.Reason, j.ClosedAt = c.To, j.Version+1, c.Reason, nanos(c.At)
	})
	return []outcome{{next, answer{job: ptr(next.jobs[ji].view())}}}
}

// createAttempt: a new attempt in state starting, refused on a terminal
// job or while an attempt blocks it; where both hold (a cancelled job
// whose attempt is still open), either refusal is the contract's.
func createAttempt(s *state, na jobs.NewAttempt) []outcome {
	if ji, _ := s.attemptIndex(na.ID); ji >= 0 || na.ID == "" {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	ji := s.jobIndex(na.JobID)
	if ji < 0 {
		return []outcome{{s, refuse("ErrNotFound")}}
	}
	j := &s.jobs[ji]
	var refusals []outcome
	if j.State.Terminal() {
		refusals = append(refusals, jobClosed(s, ji))
	}
	if refusals = append(refusals, inFlight(s, ji, na.Hedge)...); len(refusals) > 0 {
		return refusals
	}
	provider := na.Provider
	if provider == "" {
		provider = j.Provider
	}
	n := attempt{ID: na.ID, Provider: provider, State: jobs.AttemptStarting, Seq: len(j.Attempts) + 1,
		BaseVersion: j.Version, Hedge: na.Hedge, UpdatedAt: nanos(na.At), ClaimedUntil: noTime}
	next := s.with(ji, func(j *job) {
		j.Attempts = append(j.Attempts, n)
		j.State = jobs.JobRunning
	})
	return []outcome{{next, answer{attempt: ptr(n.view(j.ID))}}}
}

// claimLost reports whether a write presenting token is refused: the
// attempt is claimed with another token (a runner's write, token empty,
// never is).
func claimLost(a *attempt, token string) bool { return token != "" && token != a.ClaimToken }

// updateAttempt: a guarded move of an attempt, which returns the attempt
// as stored when refused.
func updateAttempt(s *state, u jobs.AttemptUpdate) []outcome {
	if u.Check() != nil {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	ji, ai := s.attemptIndex(u.ID)
	if ji < 0 {
		return []outcome{{s, refuse("ErrNotFound")}}
	}
	j := &s.jobs[ji]
	a := &j.Attempts[ai]
	stored := ptr(a.view(j.ID))
	if claimLost(a, u.ClaimToken) {
		return []outcome{{s, answer{refusal: &refusal{sentinel: "ErrClaimLost"}, attempt: stored}}}
	}
	if a.State.Terminal() || !slices.Contains(u.From, a.State) || (u.ProviderRef != "" && a.ProviderRef != "") {
		return []outcome{{s, answer{attempt: stored, refusal: &refusal{sentinel: "ErrInvalidTransition",
			transition: &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: u.To}}}}}
	}
	if u.To.InDoubt() {
		var others []outcome
		for _, b := range j.Attempts {
			if b.ID != a.ID && b.State.InDoubt() {
				others = append(others, outcome{s, answer{refusal: &refusal{sentinel: "ErrAttemptInFlight",
					inFlight: &jobs.AttemptInFlightError{JobID: j.ID, AttemptID: b.ID, State: b.State}}}})
			}
		}
		if len(others) > 0 {
			return others
		}
	}
	next := s.with(ji, func(j *job) {
		a := &j.Attempts[ai]
		a.State, a.UpdatedAt = u.To, nanos(u.At)
		if u.ProviderRef != "" {
			a.ProviderRef = u.ProviderRef
		}
		if u.Reason != "" {
			a.Reason = u.Reason
		}
	})
	return []outcome{{next, answer{attempt: ptr(next.jobs[ji].Attempts[ai].view(j.ID))}}}
}

// completeAttempt: the compare-and-swap of cas.go, and the loser's fate.
func completeAttempt(s *state, c jobs.Completion, badJSON bool) []outcome {
	if badJSON {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	ji, ai := s.attemptIndex(c.AttemptID)
	if ji < 0 {
		return []outcome{{s, refuse("ErrNotFound")}}
	}
	j := &s.jobs[ji]
	a := &j.Attempts[ai]
	asStored := func(r *refusal) outcome {
		return outcome{s, answer{refusal: r, job: ptr(j.view()), attempt: ptr(a.view(j.ID))}}
	}
	// Both refusals leave the attempt and its job as they are; where both
	// hold (a claim taken over on an attempt since resolved), the
	// contract names no order.
	var refusals []outcome
	if claimLost(a, c.ClaimToken) {
		refusals = append(refusals, asStored(&refusal{sentinel: "ErrClaimLost"}))
	}
	if !a.State.Open() {
		refusals = append(refusals, asStored(&refusal{sentinel: "ErrInvalidTransition",
			transition: &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: jobs.AttemptSucceeded}}))
	}
	if len(refusals) > 0 {
		return refusals
	}
	at := nanos(c.At)
	if j.State == jobs.JobRunning && j.Version == a.BaseVersion && j.CompletedBy == "" {
		next := s.with(ji, func(j *job) {
			j.State, j.Result, j.CompletedBy, j.Version, j.ClosedAt = jobs.JobSucceeded, string(c.Result), a.ID, j.Version+1, at
			j.Attempts[ai].State, j.Attempts[ai].UpdatedAt = jobs.AttemptSucceeded, at
		})
		nj := &next.jobs[ji]
		return []outcome{{next, answer{job: ptr(nj.view()), attempt: ptr(nj.Attempts[ai].view(nj.ID))}}}
	}
	// Dropped: lost to the winner, or cancelled with a job closed without one.
	to := jobs.AttemptCancelled
	r := &refusal{sentinel: "ErrJobClosed", jobClosed: &jobs.JobClosedError{JobID: j.ID, State: j.State}}
	if j.CompletedBy != "" {
		to = jobs.AttemptLost
		r = &refusal{sentinel: "ErrLostRace", lostRace: &jobs.LostRaceError{JobID: j.ID, AttemptID: a.ID, WinnerID: j.CompletedBy}}
	}
	reason := jobs.DroppedReason(j.view())
	next := s.with(ji, func(j *job) {
		j.Attempts[ai].State, j.Attempts[ai].Reason, j.Attempts[ai].UpdatedAt = to, reason, at
	})
	nj := &next.jobs[ji]
	return []outcome{{next, answer{refusal: r, job: ptr(nj.view()), attempt: ptr(nj.Attempts[ai].view(nj.ID))}}}
}

// claimAttempt: a reconciler takes an open attempt, as StaleAttempts read
// it, unless another's lease runs beyond c.At.
func claimAttempt(s *state, c jobs.AttemptClaim) []outcome {
	if c.Check() != nil {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	no := outcome{s, answer{claimed: ptr(false)}}
	ji, ai := s.attemptIndex(c.ID)
	if ji < 0 {
		return []outcome{no}
	}
	a := &s.jobs[ji].Attempts[ai]
	if !a.State.Open() || a.State != c.State {
		return []outcome{no}
	}
	can := timeEqual(a.UpdatedAt, nanos(c.UpdatedAt)).and(timeBefore(nanos(c.At), a.ClaimedUntil).not())
	var out []outcome
	if can&canTrue != 0 {
		next := s.with(ji, func(j *job) {
			j.Attempts[ai].ClaimToken, j.Attempts[ai].ClaimedUntil = c.Token, nanos(c.Until)
		})
		out = append(out, outcome{next, answer{claimed: ptr(true), attempt: ptr(next.jobs[ji].Attempts[ai].view(s.jobs[ji].ID))}})
	}
	if can&canFalse != 0 {
		out = append(out, no)
	}
	return out
}

// renewClaim: the lease of a claim still held moves to c.Until.
func renewClaim(s *state, c jobs.AttemptClaim) []outcome {
	if c.Check() != nil {
		return []outcome{{s, refuse("ErrInvalidInput")}}
	}
	ji, ai := s.attemptIndex(c.ID)
	if ji < 0 || s.jobs[ji].Attempts[ai].ClaimToken != c.Token {
		return []outcome{{s, answer{claimed: ptr(false)}}}
	}
	next := s.with(ji, func(j *job) { j.Attempts[ai].ClaimedUntil = nanos(c.Until) })
	return []outcome{{next, answer{claimed: ptr(true)}}}
}

// maxPurgeable bounds the purgeable jobs of one partition whose every
// subset a purge is tried with; past it, only the oldest n are (see
// call.overflow).
const maxPurgeable = 10

// purgeJobs: a purge deletes, with their attempts, jobs that are terminal,
// closed (and created) before q.Before, and whose attempts are all
// terminal, up to q.Limit. Its answer counts jobs across every partition,
// so in one partition it may have deleted any subset of those (the SQL
// stores skip rows that are locked): none whatever it says, or some if it
// says it deleted at least as many jobs and attempts. A dry run, or a
// limit of zero, deletes nothing.
func purgeJobs(s *state, q jobs.PurgeQuery, c *call) []outcome {
	before := nanos(q.Before)
	var candidates []int
	for i, j := range s.jobs {
		if !j.State.Terminal() || slices.ContainsFunc(j.Attempts, func(a attempt) bool { return a.State.Open() }) {
			continue
		}
		if timeBefore(j.ClosedAt, before).and(timeBefore(j.CreatedAt, before))&canTrue != 0 {
			candidates = append(candidates, i)
		}
	}
	out := []outcome{{s, answer{anyAnswer: true}}}
	if q.DryRun || q.Limit <= 0 || len(candidates) == 0 {
		return out
	}
	deleting := func(drop []int) outcome {
		attempts := 0
		for _, i := range drop {
			attempts += len(s.jobs[i].Attempts)
		}
		return outcome{s.without(drop), answer{purged: &jobs.PurgeCount{Jobs: int64(len(drop)), Attempts: int64(attempts)}}}
	}
	if len(candidates) > maxPurgeable {
		c.overflow.Store(true)
		for n := 1; n <= min(len(candidates), q.Limit); n++ {
			out = append(out, deleting(candidates[:n])) // oldest first, as the stores read them
		}
		return out
	}
	for set := 1; set < 1<<len(candidates); set++ {
		var drop []int
		for b, i := range candidates {
			if set&(1<<b) != 0 {
				drop = append(drop, i)
			}
		}
		if len(drop) <= q.Limit {
			out = append(out, deleting(drop))
		}
	}
	return out
}
