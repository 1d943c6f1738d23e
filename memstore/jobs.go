package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/intentjobs/jobs"
)

// CreateJob implements jobs.Store.
func (s *Store) CreateJob(ctx context.Context, j jobs.Job) (jobs.Job, bool, error) {
	if err := checkJSON("Params", j.Params); err != nil {
		return jobs.Job{}, false, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, false, err
	}
	defer s.mu.Unlock()
	return s.createJob(j)
}

// createJob is CreateJob with the lock held.
func (s *Store) createJob(j jobs.Job) (jobs.Job, bool, error) {
	// One job per (Owner, Key): a later call gets the job that exists,
	// whatever it asks for (the Manager compares fingerprints), and
	// writes nothing.
	if existing, ok := s.keys[ownerKey{j.Owner, j.Key}]; ok {
		return existing.export(), false, nil
	}
	if err := checkNewID("ID", j.ID, s.jobs[j.ID] != nil); err != nil {
		return jobs.Job{}, false, err
	}
	// A new job is pending at version 1, whatever else j says.
	stored := &job{Job: jobs.Job{
		ID:          j.ID,
		Owner:       j.Owner,
		Key:         j.Key,
		Kind:        j.Kind,
		Provider:    j.Provider,
		Params:      slices.Clone(j.Params),
		Fingerprint: j.Fingerprint,
		State:       jobs.JobPending,
		Version:     1,
		CreatedAt:   j.CreatedAt,
		UpdatedAt:   j.CreatedAt,
	}}
	s.jobs[j.ID] = stored
	s.keys[ownerKey{j.Owner, j.Key}] = stored
	i, _ := slices.BinarySearch(s.ids, j.ID)
	s.ids = slices.Insert(s.ids, i, j.ID)
	return stored.export(), true, nil
}

// Job implements jobs.Store.
func (s *Store) Job(ctx context.Context, id string) (jobs.Job, error) {
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer s.mu.Unlock()
	j, err := s.findJob(id)
	if err != nil {
		return jobs.Job{}, err
	}
	return j.export(), nil
}

// JobByKey implements jobs.Store.
func (s *Store) JobByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer s.mu.Unlock()
	j, ok := s.keys[ownerKey{owner, key}]
	if !ok {
		return jobs.Job{}, fmt.Errorf("memstore: no job for this owner and key: %w", jobs.ErrNotFound)
	}
	return j.export(), nil
}

// ListJobs implements jobs.JobLister.
func (s *Store) ListJobs(ctx context.Context, q jobs.JobQuery) ([]jobs.Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	ids := s.ids // in ID order
	if q.Newest {
		ids = slices.Clone(ids)
		slices.Reverse(ids)
	}
	var out []jobs.Job
	for _, id := range ids {
		if len(out) >= limit {
			break
		}
		j := s.jobs[id]
		switch {
		case q.After != "" && !q.Newest && id <= q.After,
			q.After != "" && q.Newest && id >= q.After,
			q.Owner != "" && j.Owner != q.Owner,
			len(q.States) > 0 && !slices.Contains(q.States, j.State),
			q.Kind != "" && j.Kind != q.Kind,
			q.Provider != "" && j.Provider != q.Provider,
			!q.CreatedAfter.IsZero() && j.CreatedAt.Before(q.CreatedAfter),
			!q.CreatedBefore.IsZero() && !j.CreatedAt.Before(q.CreatedBefore):
			continue
		}
		out = append(out, j.export())
	}
	return out, nil
}

// CloseJob implements jobs.Store.
func (s *Store) CloseJob(ctx context.Context, c jobs.JobClose) (jobs.Job, error) {
	if err := c.Check(); err != nil {
		return jobs.Job{}, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer s.mu.Unlock()
	j, err := s.findJob(c.ID)
	if err != nil {
		return jobs.Job{}, err
	}
	// A terminal job never changes again.
	if j.State.Terminal() {
		return jobs.Job{}, &jobs.JobClosedError{JobID: j.ID, State: j.State}
	}
	// Giving up is refused while any attempt is open: its provider may
	// still deliver. Cancelling is the override, and leaves the attempts
	// as they are.
	if c.To == jobs.JobFailed {
		if b := j.blocker(false); b != nil {
			return jobs.Job{}, b.inFlight()
		}
	}
	j.State = c.To
	j.Version++ // closing changes the job's outcome
	j.Reason = c.Reason
	j.UpdatedAt = c.At
	j.ClosedAt = c.At
	s.wake(j.ID)
	return j.export(), nil
}

// blocker returns the attempt that stands in the way of a new attempt, or
// of giving the job up: one in doubt (starting or unknown) first, then a
// running one, unless hedge allows running ones.
func (j *job) blocker(hedge bool) *attempt {
	for _, a := range j.tries {
		if a.State.InDoubt() {
			return a
		}
	}
	if hedge {
		return nil
	}
	for _, a := range j.tries {
		if a.State == jobs.AttemptRunning {
			return a
		}
	}
	return nil
}

// ReplaceJob implements jobs.Store. The old job's key moves to its retired
// form in the key index, where JobByKey finds it, and the new job takes
// the key, under one lock: both or neither.
func (s *Store) ReplaceJob(ctx context.Context, r jobs.JobReplacement) (jobs.Job, bool, error) {
	if err := r.Check(); err != nil {
		return jobs.Job{}, false, err
	}
	if err := checkJSON("Params", r.New.Params); err != nil {
		return jobs.Job{}, false, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Job{}, false, err
	}
	defer s.mu.Unlock()

	key := ownerKey{r.New.Owner, r.New.Key}
	old, ok := s.keys[key]
	if ok && old.ID == r.OldID && slices.Contains(r.From, old.State) {
		// An attempt that may still act, or whose result was dropped,
		// keeps the key with its job: a second job would run the intent
		// twice.
		if b := old.blocker(false); b != nil {
			return jobs.Job{}, false, &jobs.AttemptInFlightError{JobID: old.ID, AttemptID: b.ID, State: b.State}
		}
		if slices.ContainsFunc(old.tries, func(a *attempt) bool { return a.export().ResultDropped() }) {
			ok = false
		}
	}
	if !ok || old.ID != r.OldID || !slices.Contains(r.From, old.State) {
		// Nothing to retire: CreateJob's answer.
		return s.createJob(r.New)
	}
	if err := checkNewID("ID", r.New.ID, s.jobs[r.New.ID] != nil); err != nil {
		return jobs.Job{}, false, err
	}
	delete(s.keys, key)
	old.ReplacedBy = r.New.ID
	s.keys[old.storedKey()] = old
	return s.createJob(r.New)
}

// storedKey is the key under which j is indexed: its own, or, once a new
// job took it over, its retired form.
func (j *job) storedKey() ownerKey {
	if j.ReplacedBy != "" {
		return ownerKey{j.Owner, jobs.RetiredKey(j.Key, j.ReplacedBy)}
	}
	return ownerKey{j.Owner, j.Key}
}
