package memstore

import (
	"context"
	"slices"

	"github.com/intentjobs/jobs"
)

// The capabilities for operators' tools.

var (
	_ jobs.JobCounter    = (*Store)(nil)
	_ jobs.AttemptLister = (*Store)(nil)
	_ jobs.LookupStore   = (*Store)(nil)
)

// CountJobs implements jobs.JobCounter.
func (s *Store) CountJobs(ctx context.Context, q jobs.JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n int64
	for _, j := range s.jobs {
		if selects(q, j) {
			n++
		}
	}
	return n, nil
}

// selects reports whether q's filters (not its page) select j.
func selects(q jobs.JobQuery, j *job) bool {
	switch {
	case q.Owner != "" && j.Owner != q.Owner,
		len(q.States) > 0 && !slices.Contains(q.States, j.State),
		q.Kind != "" && j.Kind != q.Kind,
		q.Provider != "" && j.Provider != q.Provider,
		!q.CreatedAfter.IsZero() && j.CreatedAt.Before(q.CreatedAfter),
		!q.CreatedBefore.IsZero() && !j.CreatedAt.Before(q.CreatedBefore):
		return false
	}
	return true
}

// ListAttempts implements jobs.AttemptLister.
func (s *Store) ListAttempts(ctx context.Context, q jobs.AttemptQuery) ([]jobs.Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var all []*attempt
	for _, a := range s.attempts {
		switch {
		case q.After != "" && !q.Newest && a.ID <= q.After,
			q.After != "" && q.Newest && a.ID >= q.After,
			q.ProviderRef != "" && a.ProviderRef != q.ProviderRef,
			q.Provider != "" && a.Provider != q.Provider,
			len(q.States) > 0 && !slices.Contains(q.States, a.State),
			!q.CreatedAfter.IsZero() && a.CreatedAt.Before(q.CreatedAfter),
			!q.CreatedBefore.IsZero() && !a.CreatedAt.Before(q.CreatedBefore):
			continue
		}
		all = append(all, a)
	}
	slices.SortFunc(all, func(x, y *attempt) int {
		if q.Newest {
			x, y = y, x
		}
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	out := make([]jobs.Attempt, 0, min(limit, len(all)))
	for _, a := range all[:min(limit, len(all))] {
		out = append(out, a.export())
	}
	return out, nil
}

// RecordLookup implements jobs.LookupStore.
func (s *Store) RecordLookup(ctx context.Context, l jobs.AttemptLookup) error {
	if err := l.Check(); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a, err := s.findAttempt(l.AttemptID)
	if err != nil {
		return err
	}
	a.lookupAt, a.lookupAnswer = l.At, l.Answer
	return nil
}

// ReconcileStates implements jobs.LookupStore.
func (s *Store) ReconcileStates(ctx context.Context, attemptIDs []string) ([]jobs.ReconcileState, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []jobs.ReconcileState
	for _, id := range attemptIDs {
		a, ok := s.attempts[id]
		if !ok {
			continue
		}
		out = append(out, jobs.ReconcileState{AttemptID: id, LookupAt: a.lookupAt, LookupAnswer: a.lookupAnswer,
			ClaimToken: a.claimToken, ClaimedUntil: a.claimedUntil})
	}
	return out, nil
}
