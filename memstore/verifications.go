package memstore

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/intentjobs/jobs"
)

// RecordVerification implements jobs.Store.
func (s *Store) RecordVerification(ctx context.Context, v jobs.Verification) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	_, taken := s.verifications[v.ID]
	if err := checkNewID("ID", v.ID, taken); err != nil {
		return err
	}
	s.verifications[v.ID] = v
	return nil
}

// Verifications implements jobs.Store.
func (s *Store) Verifications(ctx context.Context, f jobs.VerificationFilter) ([]jobs.Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []jobs.Verification
	for _, v := range s.verifications {
		if matches(f, v) {
			out = append(out, v)
		}
	}
	// Newest first: the latest verification decides a failover.
	slices.SortFunc(out, func(x, y jobs.Verification) int {
		return cmp.Or(y.VerifiedAt.Compare(x.VerifiedAt), strings.Compare(y.ID, x.ID))
	})
	return out[:min(limit, len(out))], nil
}

// matches reports whether v passes f, whose empty fields match everything.
func matches(f jobs.VerificationFilter, v jobs.Verification) bool {
	return (f.Provider == "" || f.Provider == v.Provider) &&
		(f.Kind == "" || f.Kind == v.Kind) &&
		(f.ContractVersion == "" || f.ContractVersion == v.ContractVersion)
}
