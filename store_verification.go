package jobs

import (
	"context"
)

const verificationCols = `id, provider, kind, contract_version, passed, reason, verified_at, expires_at`

const (
	qInsertVerification = `INSERT INTO job_verifications (` + verificationCols + `)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	qVerifications = `SELECT ` + verificationCols + ` FROM job_verifications
    WHERE ($1 = '' OR provider = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR contract_version = $3)
    ORDER BY verified_at DESC, id DESC LIMIT $4`

	// Served by job_verifications_lookup_idx.
	qLatestVerification = `SELECT ` + verificationCols + ` FROM job_verifications
    WHERE provider = $1 AND kind = $2 AND contract_version = $3
    ORDER BY verified_at DESC, id DESC LIMIT 1`
)

func scanVerification(sc scanner) (Verification, error) {
	var v Verification
	err := sc.Scan(&v.ID, &v.Provider, &v.Kind, &v.ContractVersion, &v.Passed, &v.Reason,
		dbTime{&v.VerifiedAt}, dbTime{&v.ExpiresAt})
	return v, err
}

// RecordVerification implements VerificationStore.
func (s *SQLStore) RecordVerification(ctx context.Context, v Verification) error {
	var expires any
	if !v.ExpiresAt.IsZero() {
		expires = s.d.ts(v.ExpiresAt)
	}
	err := s.withRetry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, s.d.rebind(qInsertVerification),
			v.ID, v.Provider, v.Kind, v.ContractVersion, v.Passed, v.Reason, s.d.ts(v.VerifiedAt), expires)
		return err
	})
	return s.d.interpret("record verification", err)
}

// Verifications implements VerificationStore.
func (s *SQLStore) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s, s.rdb, "list verifications", scanVerification, qVerifications, f.Provider, f.Kind, f.ContractVersion, limit)
}
