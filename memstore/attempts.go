package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/intentjobs/jobs"
)

// Attempt implements jobs.Store.
func (s *Store) Attempt(ctx context.Context, id string) (jobs.Attempt, error) {
	if err := s.lock(ctx); err != nil {
		return jobs.Attempt{}, err
	}
	defer s.mu.Unlock()
	a, err := s.findAttempt(id)
	if err != nil {
		return jobs.Attempt{}, err
	}
	return a.export(), nil
}

// Attempts implements jobs.Store.
func (s *Store) Attempts(ctx context.Context, jobID string) ([]jobs.Attempt, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j, err := s.findJob(jobID)
	if err != nil {
		return nil, err
	}
	var out []jobs.Attempt
	for _, a := range j.tries {
		out = append(out, a.export())
	}
	return out, nil
}

// CreateAttempt implements jobs.Store.
func (s *Store) CreateAttempt(ctx context.Context, na jobs.NewAttempt) (jobs.Attempt, error) {
	if err := s.lock(ctx); err != nil {
		return jobs.Attempt{}, err
	}
	defer s.mu.Unlock()
	if err := checkNewID("ID", na.ID, s.attempts[na.ID] != nil); err != nil {
		return jobs.Attempt{}, err
	}
	j, err := s.findJob(na.JobID)
	if err != nil {
		return jobs.Attempt{}, err
	}
	// A terminal job accepts no new attempt.
	if j.State.Terminal() {
		return jobs.Attempt{}, &jobs.JobClosedError{JobID: j.ID, State: j.State}
	}
	// No new attempt while one is starting or unknown, nor while one is
	// running unless hedging was asked for.
	if b := j.blocker(na.Hedge); b != nil {
		return jobs.Attempt{}, b.inFlight()
	}
	provider := na.Provider
	if provider == "" {
		provider = j.Provider
	}
	a := &attempt{Attempt: jobs.Attempt{
		ID:          na.ID,
		JobID:       j.ID,
		Seq:         len(j.tries) + 1,
		Provider:    provider,
		State:       jobs.AttemptStarting,
		BaseVersion: j.Version, // what its CompleteAttempt compares against
		Hedge:       na.Hedge,
		CreatedAt:   na.At,
		UpdatedAt:   na.At,
	}}
	s.attempts[a.ID] = a
	j.tries = append(j.tries, a)
	j.Attempts = len(j.tries)
	j.State = jobs.JobRunning
	j.UpdatedAt = na.At
	return a.export(), nil
}

// UpdateAttempt implements jobs.Store.
func (s *Store) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	if err := u.Check(); err != nil {
		return jobs.Attempt{}, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Attempt{}, err
	}
	defer s.mu.Unlock()
	a, err := s.findAttempt(u.ID)
	if err != nil {
		return jobs.Attempt{}, err
	}
	// A reconciler's write applies only while its claim holds.
	if err := a.checkClaim(u.ClaimToken); err != nil {
		return a.export(), err
	}
	if !a.canMove(u) {
		return a.export(), &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: u.To}
	}
	// At most one attempt per job is in doubt at any time.
	if u.To.InDoubt() {
		if b := s.jobs[a.JobID].otherInDoubt(a); b != nil {
			return a.export(), b.inFlight()
		}
	}
	a.move(u.To, u.ProviderRef, u.Reason, u.At)
	return a.export(), nil
}

// canMove reports whether u may apply to the attempt as it is.
func (a *attempt) canMove(u jobs.AttemptUpdate) bool {
	switch {
	case a.State.Terminal(): // a terminal attempt never changes again
		return false
	case !slices.Contains(u.From, a.State): // the move starts elsewhere
		return false
	case u.ProviderRef != "" && a.ProviderRef != "": // a recorded reference never changes
		return false
	}
	return true
}

// otherInDoubt returns an attempt of the job other than a that is starting
// or unknown, or nil.
func (j *job) otherInDoubt(a *attempt) *attempt {
	for _, b := range j.tries {
		if b != a && b.State.InDoubt() {
			return b
		}
	}
	return nil
}

// move puts the attempt in state to at time at, recording ref and reason
// when they are not empty; a terminal state is the attempt's finish.
func (a *attempt) move(to jobs.AttemptState, ref, reason string, at time.Time) {
	a.State = to
	if ref != "" {
		a.ProviderRef = ref
	}
	if reason != "" {
		a.Reason = reason
	}
	a.UpdatedAt = at
	if to.Terminal() {
		a.FinishedAt = at
	}
}

// CompleteAttempt implements jobs.Store: the compare-and-swap of the
// root package's cas.go. Exactly one attempt of a job wins, the first to get here; a late
// result is stored nowhere.
func (s *Store) CompleteAttempt(ctx context.Context, c jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	if err := checkJSON("Result", c.Result); err != nil {
		return jobs.Job{}, jobs.Attempt{}, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, jobs.Attempt{}, err
	}
	defer s.mu.Unlock()
	a, err := s.findAttempt(c.AttemptID)
	if err != nil {
		return jobs.Job{}, jobs.Attempt{}, err
	}
	j := s.jobs[a.JobID]
	// A reconciler's result is offered only while its claim holds.
	if err := a.checkClaim(c.ClaimToken); err != nil {
		return j.export(), a.export(), err
	}
	// Only an open attempt finishes; a terminal one never changes again.
	if !a.State.Open() {
		return j.export(), a.export(), &jobs.TransitionError{AttemptID: a.ID, From: a.State, To: jobs.AttemptSucceeded}
	}
	// The swap: the job is running, at the version the attempt read when
	// it started, and no attempt completed it.
	if j.State == jobs.JobRunning && j.Version == a.BaseVersion && j.CompletedBy == "" {
		j.State = jobs.JobSucceeded
		j.Result = slices.Clone(c.Result)
		j.CompletedBy = a.ID
		j.Version++
		j.UpdatedAt = c.At
		j.ClosedAt = c.At
		a.move(jobs.AttemptSucceeded, "", "", c.At)
		s.wake(j.ID)
		return j.export(), a.export(), nil
	}
	// Too late: another attempt won. The result is dropped.
	if j.CompletedBy != "" {
		a.move(jobs.AttemptLost, "", jobs.DroppedReason(j.export()), c.At)
		return j.export(), a.export(), &jobs.LostRaceError{JobID: j.ID, AttemptID: a.ID, WinnerID: j.CompletedBy}
	}
	// Otherwise the job was closed without a winner (failed or
	// cancelled): its version changes only when it closes, so a running
	// job is always at the version its attempts read.
	a.move(jobs.AttemptCancelled, "", jobs.DroppedReason(j.export()), c.At)
	return j.export(), a.export(), &jobs.JobClosedError{JobID: j.ID, State: j.State}
}
