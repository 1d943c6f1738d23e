package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/intentjobs/jobs"
)

// StaleAttempts implements jobs.Store. A query without a limit returns at
// most 100 attempts.
func (s *Store) StaleAttempts(ctx context.Context, q jobs.StaleQuery) ([]jobs.Attempt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var stale []*attempt
	for _, a := range s.attempts {
		if a.stale(q) {
			stale = append(stale, a)
		}
	}
	// Least recently updated first; the ID orders attempts updated at the
	// same time, so that every call lists them alike.
	slices.SortFunc(stale, func(x, y *attempt) int {
		return cmp.Or(x.UpdatedAt.Compare(y.UpdatedAt), strings.Compare(x.ID, y.ID))
	})
	var out []jobs.Attempt
	for _, a := range stale[:min(limit, len(stale))] {
		out = append(out, a.export())
	}
	return out, nil
}

// stale reports whether q lists the attempt: unknown and last updated
// before q.UnknownBefore, or starting or running and last updated before
// q.OpenBefore, and not claimed beyond q.UnclaimedAt when that is set.
func (a *attempt) stale(q jobs.StaleQuery) bool {
	switch a.State {
	case jobs.AttemptUnknown:
		if !a.UpdatedAt.Before(q.UnknownBefore) {
			return false
		}
	case jobs.AttemptStarting, jobs.AttemptRunning:
		if !a.UpdatedAt.Before(q.OpenBefore) {
			return false
		}
	default:
		return false
	}
	// Claimed beyond UnclaimedAt: a reconciler is examining it.
	return q.UnclaimedAt.IsZero() || !a.claimedUntil.After(q.UnclaimedAt)
}

// ClaimAttempt implements jobs.Store.
func (s *Store) ClaimAttempt(ctx context.Context, c jobs.AttemptClaim) (jobs.Attempt, bool, error) {
	if err := c.Check(); err != nil {
		return jobs.Attempt{}, false, err
	}
	if err := s.lock(ctx); err != nil {
		return jobs.Attempt{}, false, err
	}
	defer s.mu.Unlock()
	a, ok := s.attempts[c.ID]
	switch {
	case !ok, !a.State.Open(): // only an attempt in doubt is reconciled
		return jobs.Attempt{}, false, nil
	case a.State != c.State, !a.UpdatedAt.Equal(c.UpdatedAt): // it moved since StaleAttempts read it
		return jobs.Attempt{}, false, nil
	case a.claimedUntil.After(c.At): // another reconciler's lease runs
		return jobs.Attempt{}, false, nil
	}
	a.claimToken, a.claimedUntil = c.Token, c.Until
	return a.export(), true, nil
}

// RenewClaim implements jobs.Store.
func (s *Store) RenewClaim(ctx context.Context, c jobs.AttemptClaim) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	a, ok := s.attempts[c.ID]
	if !ok || a.claimToken != c.Token { // taken over, or never claimed
		return false, nil
	}
	a.claimedUntil = c.Until
	return true, nil
}

// checkClaim returns an error matching ErrClaimLost unless token is empty
// (a runner's write, which ignores claims) or still names the attempt's
// claim. Claims only ever pass to new tokens: one found gone stays gone.
func (a *attempt) checkClaim(token string) error {
	if token == "" || token == a.claimToken {
		return nil
	}
	return fmt.Errorf("memstore: attempt %s: claim %s: %w", a.ID, token, jobs.ErrClaimLost)
}
