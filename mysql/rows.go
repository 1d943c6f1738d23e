package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/intentjobs/jobs"
)

// The columns every job, attempt and verification query returns, in the
// order the scan functions read them.
const (
	jobCols = `id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
    attempt_count, result, completed_by, reason, created_at, updated_at, closed_at`

	attemptCols = `id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
    created_at, updated_at, finished_at`

	verificationCols = `id, provider, kind, contract_version, passed, reason, verified_at, expires_at`
)

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// dbTime formats t as the store writes every time: UTC, to the
// microsecond, as text, so that neither the session's time zone nor the
// driver's loc changes what is stored.
func dbTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000000")
}

// boundTime is dbTime(t) for a bound of a comparison: the zero time, which
// no stored time precedes, is the first time DATETIME holds on both
// servers.
func boundTime(t time.Time) string {
	if t.IsZero() {
		return "1000-01-01 00:00:00.000000"
	}
	return dbTime(t)
}

// nullTime is dbTime(t), or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dbTime(t)
}

// stored is t as the database holds it: UTC, truncated to microseconds.
func stored(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// timeCol scans a DATETIME(6) column, or NULL, as UTC: from a time.Time
// (parseTime=true), whose wall clock is taken as UTC whatever loc the
// driver parsed it in, or from its text (parseTime=false).
type timeCol struct{ t *time.Time }

func (c timeCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.t = time.Time{}
	case time.Time:
		*c.t = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
	case []byte:
		return c.parse(string(v))
	case string:
		return c.parse(v)
	default:
		return fmt.Errorf("jobs/mysql: cannot scan %T into a time", src)
	}
	return nil
}

func (c timeCol) parse(s string) error {
	t, err := time.ParseInLocation("2006-01-02 15:04:05.999999", s, time.UTC)
	if err != nil {
		return fmt.Errorf("jobs/mysql: cannot read the time %q: %v", s, err)
	}
	*c.t = t
	return nil
}

func scanJob(sc scanner) (jobs.Job, error) { return scanJobAnd(sc) }

// scanJobAnd scans a job's columns followed by extra ones.
func scanJobAnd(sc scanner, extra ...any) (jobs.Job, error) {
	var r jobRow
	if err := sc.Scan(append(r.dest(), extra...)...); err != nil {
		return jobs.Job{}, err
	}
	return r.job(), nil
}

// jobRow holds the columns of a job as they are scanned.
type jobRow struct {
	j              jobs.Job
	completedBy    sql.NullString
	params, result []byte
	key            string
}

// dest returns where the columns jobCols go.
func (r *jobRow) dest() []any {
	j := &r.j
	return []any{&j.ID, &j.Owner, &r.key, &j.Kind, &j.Provider, &r.params, &j.Fingerprint, &j.State, &j.Version,
		&j.Attempts, &r.result, &r.completedBy, &j.Reason, timeCol{&j.CreatedAt}, timeCol{&j.UpdatedAt}, timeCol{&j.ClosedAt}}
}

// job returns the job scanned, its key read back: a retired key is the
// key it was submitted with, and ReplacedBy the job that took it over.
func (r *jobRow) job() jobs.Job {
	j := r.j
	j.Params = r.params
	if r.result != nil {
		j.Result = r.result
	}
	j.CompletedBy = r.completedBy.String
	j.Key = r.key
	if orig, by, ok := jobs.ParseRetiredKey(r.key); ok {
		j.Key, j.ReplacedBy = orig, by
	}
	return j
}

func scanAttempt(sc scanner) (jobs.Attempt, error) { return scanAttemptAnd(sc) }

// scanAttemptAnd scans an attempt's columns followed by extra ones.
func scanAttemptAnd(sc scanner, extra ...any) (jobs.Attempt, error) {
	var a jobs.Attempt
	dest := []any{&a.ID, &a.JobID, &a.Seq, &a.Provider, &a.State, &a.BaseVersion, &a.Hedge, &a.ProviderRef, &a.Reason,
		timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt}, timeCol{&a.FinishedAt}}
	err := sc.Scan(append(dest, extra...)...)
	return a, err
}

func scanVerification(sc scanner) (jobs.Verification, error) {
	var v jobs.Verification
	err := sc.Scan(&v.ID, &v.Provider, &v.Kind, &v.ContractVersion, &v.Passed, &v.Reason,
		timeCol{&v.VerifiedAt}, timeCol{&v.ExpiresAt})
	return v, err
}

func scanBlocker(sc scanner) (*jobs.AttemptInFlightError, error) {
	var b jobs.AttemptInFlightError
	return &b, sc.Scan(&b.AttemptID, &b.State)
}

// queryer is what *sql.DB, *sql.Tx and a caller's jobs.DBTX have in
// common.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryAll runs query and scans every row.
func queryAll[T any](ctx context.Context, q queryer, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, interpret(op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, interpret(op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, interpret(op, err)
	}
	return out, nil
}

func jobNotFound(id string) error { return fmt.Errorf("jobs/mysql: job %s: %w", id, jobs.ErrNotFound) }
func attemptNotFound(id string) error {
	return fmt.Errorf("jobs/mysql: attempt %s: %w", id, jobs.ErrNotFound)
}

var errNoJobForKey = fmt.Errorf("jobs/mysql: no job for this owner and key: %w", jobs.ErrNotFound)
