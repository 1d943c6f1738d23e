package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// The capabilities for operators' tools: JobLister, JobCounter,
// AttemptLister and LookupStore.
//
// A page of a list is read along an index and stops once it is full: the
// page's bound is a range of the primary key (id > ? or id < ?), ORDER BY
// id … LIMIT reads the primary key in its order, and the other filters
// are read on the rows the scan meets. FORCE INDEX names the index each
// listing reads, so that the plan is the same whatever the optimizer
// estimates: without it, an owner filter could make it read every job of
// the owner through the unique index and sort them for one page. The
// attempts in doubt are read through intentjobs_attempts_one_in_doubt
// (only they have a value there), and attempts by provider reference
// through intentjobs_attempts_provider_ref_idx.
//
// An age filter bounds the ID too: the Manager makes each ID at the time
// it records as created_at, and an ID begins with its creation's
// millisecond (ten digits of Crockford's base32 after the prefix), so that
// IDs sort in creation order. The created_at condition stays, for the
// rows of the bounding millisecond.

var (
	_ jobs.JobCounter    = (*Store)(nil)
	_ jobs.AttemptLister = (*Store)(nil)
	_ jobs.LookupStore   = (*Store)(nil)
)

// The prefixes of the IDs the Manager makes.
const (
	jobIDPrefix     = "job_"
	attemptIDPrefix = "att_"
)

// crockford is Crockford's base32 alphabet, in which IDs are written: it
// sorts in the order of the values it encodes.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idTimePrefix is the prefix and the ten digits of time that begin every
// ID made with prefix at t's millisecond: 48 bits of milliseconds since
// the Unix epoch, the first digit holding the top three.
func idTimePrefix(prefix string, t time.Time) string {
	ms := uint64(t.UnixMilli()) & (1<<48 - 1)
	var digits [10]byte
	for i := 9; i >= 0; i-- {
		digits[i] = crockford[ms&31]
		ms >>= 5
	}
	return prefix + string(digits[:])
}

// idBounds are the conditions on id of a page: IDs past the page before's
// last (after, in the order asked for), and within the age filters. Where
// the filters fall outside what IDs can hold, they bound nothing.
type idBounds struct {
	lo, hi string // id > lo, id < hi; "" for no bound
}

func pageBounds(prefix, after string, newest bool, createdAfter, createdBefore time.Time) idBounds {
	var b idBounds
	if after != "" && !newest {
		b.lo = after
	}
	if after != "" && newest {
		b.hi = after
	}
	const maxMs = 1<<48 - 1
	if !createdAfter.IsZero() && createdAfter.UnixMilli() >= 0 && createdAfter.UnixMilli() <= maxMs {
		// Below every ID made at createdAfter's millisecond or later, which
		// extend or exceed its ten digits.
		b.lo = max(b.lo, idTimePrefix(prefix, createdAfter))
	}
	if !createdBefore.IsZero() && createdBefore.UnixMilli() >= 0 && createdBefore.UnixMilli() < maxMs {
		// Above every ID made at createdBefore's millisecond or earlier.
		if hi := idTimePrefix(prefix, createdBefore.Add(time.Millisecond)); b.hi == "" || hi < b.hi {
			b.hi = hi
		}
	}
	return b
}

// filter builds the WHERE clause of a listing, condition by condition.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, args ...any) {
	f.conds = append(f.conds, cond)
	f.args = append(f.args, args...)
}

func (f *filter) in(col string, values []string) {
	if len(values) > 0 {
		args := make([]any, len(values))
		for i, v := range values {
			args[i] = v
		}
		f.add(col+` IN (`+placeholders(len(values))+`)`, args...)
	}
}

func (f *filter) ids(b idBounds) {
	if b.lo != "" {
		f.add(`id > ?`, b.lo)
	}
	if b.hi != "" {
		f.add(`id < ?`, b.hi)
	}
}

func (f *filter) createdBetween(after, before time.Time) {
	if !after.IsZero() {
		f.add(`created_at >= ?`, boundTime(after))
	}
	if !before.IsZero() {
		f.add(`created_at < ?`, boundTime(before))
	}
}

func (f *filter) where() string {
	if len(f.conds) == 0 {
		return ``
	}
	return ` WHERE ` + strings.Join(f.conds, ` AND `)
}

// page is the end of a listing's statement: its order, and its limit.
func (f *filter) page(newest bool, limit int) string {
	if limit <= 0 {
		limit = 100
	}
	f.args = append(f.args, limit)
	if newest {
		return ` ORDER BY id DESC LIMIT ?`
	}
	return ` ORDER BY id LIMIT ?`
}

func names[T ~string](list []T) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// jobFilters adds the filters of q but its page and age.
func (f *filter) jobFilters(q jobs.JobQuery) {
	if q.Owner != "" {
		f.add(`owner = ?`, q.Owner)
	}
	f.in(`state`, names(q.States))
	if q.Kind != "" {
		f.add(`kind = ?`, q.Kind)
	}
	if q.Provider != "" {
		f.add(`provider = ?`, q.Provider)
	}
}

// listJobsSQL is the statement of ListJobs, and its arguments.
func listJobsSQL(q jobs.JobQuery) (string, []any) {
	var f filter
	f.ids(pageBounds(jobIDPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore))
	f.jobFilters(q)
	f.createdBetween(q.CreatedAfter, q.CreatedBefore)
	end := f.page(q.Newest, q.Limit)
	return `SELECT ` + jobCols + ` FROM intentjobs_jobs FORCE INDEX (PRIMARY)` + f.where() + end, f.args
}

// countJobsSQL is the statement of CountJobs, and its arguments. A count
// without an age filter reads every job, by whichever index the optimizer
// likes (the unique index for an owner); with one, the range of the
// primary key the age bounds.
func countJobsSQL(q jobs.JobQuery) (string, []any) {
	var f filter
	from := ` FROM intentjobs_jobs`
	if !q.CreatedAfter.IsZero() || !q.CreatedBefore.IsZero() {
		from += ` FORCE INDEX (PRIMARY)`
		f.ids(pageBounds(jobIDPrefix, "", false, q.CreatedAfter, q.CreatedBefore))
	}
	f.jobFilters(q)
	f.createdBetween(q.CreatedAfter, q.CreatedBefore)
	return `SELECT COUNT(*)` + from + f.where(), f.args
}

// listAttemptsSQL is the statement of ListAttempts, and its arguments.
func listAttemptsSQL(q jobs.AttemptQuery) (string, []any) {
	var f filter
	index := `PRIMARY`
	switch {
	case q.ProviderRef != "":
		index = `intentjobs_attempts_provider_ref_idx`
		f.add(`provider_ref = ?`, q.ProviderRef)
	case inDoubtOnly(q.States):
		// Only the attempts in doubt have a value in in_doubt_job.
		index = `intentjobs_attempts_one_in_doubt`
		f.add(`in_doubt_job IS NOT NULL`)
	}
	f.ids(pageBounds(attemptIDPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore))
	if q.Provider != "" {
		f.add(`provider = ?`, q.Provider)
	}
	f.in(`state`, names(q.States))
	f.createdBetween(q.CreatedAfter, q.CreatedBefore)
	end := f.page(q.Newest, q.Limit)
	return `SELECT ` + attemptCols + ` FROM intentjobs_attempts FORCE INDEX (` + index + `)` + f.where() + end, f.args
}

// inDoubtOnly reports whether states are all starting or unknown.
func inDoubtOnly(states []jobs.AttemptState) bool {
	for _, s := range states {
		if !s.InDoubt() {
			return false
		}
	}
	return len(states) > 0
}

// ListJobs implements jobs.JobLister.
func (s *Store) ListJobs(ctx context.Context, q jobs.JobQuery) ([]jobs.Job, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listJobsSQL(q)
	return queryAll(ctx, s.db, "list jobs", scanJob, query, args...)
}

// CountJobs implements jobs.JobCounter.
func (s *Store) CountJobs(ctx context.Context, q jobs.JobQuery) (int64, error) {
	if err := q.Check(); err != nil {
		return 0, err
	}
	query, args := countJobsSQL(q)
	var n int64
	err := s.db.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, interpret("count jobs", err)
}

// ListAttempts implements jobs.AttemptLister.
func (s *Store) ListAttempts(ctx context.Context, q jobs.AttemptQuery) ([]jobs.Attempt, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	query, args := listAttemptsSQL(q)
	return queryAll(ctx, s.db, "list attempts", scanAttempt, query, args...)
}

// RecordLookup implements jobs.LookupStore: one UPDATE of the lookup's two
// columns, which leaves the attempt's state, reason and update time as
// they are. MySQL counts the rows an UPDATE changed, not those it found:
// a lookup recorded twice changes none the second time, and only then is
// the attempt looked for.
func (s *Store) RecordLookup(ctx context.Context, l jobs.AttemptLookup) error {
	if err := l.Check(); err != nil {
		return err
	}
	var changed int64
	err := s.retrying(ctx, "record lookup", func() error {
		res, err := s.db.ExecContext(ctx, qRecordLookup, dbTime(l.At), l.Answer, l.AttemptID)
		if err != nil {
			return err
		}
		changed, err = res.RowsAffected()
		return err
	})
	if err != nil || changed > 0 {
		return err
	}
	var one int
	err = s.db.QueryRowContext(ctx, qAttemptExists, l.AttemptID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return attemptNotFound(l.AttemptID)
	}
	return interpret("record lookup", err)
}

// maxReconcileBatch bounds the IDs of one query of ReconcileStates.
const maxReconcileBatch = 500

// ReconcileStates implements jobs.LookupStore.
func (s *Store) ReconcileStates(ctx context.Context, attemptIDs []string) ([]jobs.ReconcileState, error) {
	var out []jobs.ReconcileState
	for len(attemptIDs) > 0 {
		batch := attemptIDs[:min(len(attemptIDs), maxReconcileBatch)]
		attemptIDs = attemptIDs[len(batch):]
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		states, err := queryAll(ctx, s.db, "reconcile states", scanReconcileState,
			qReconcileStates+placeholders(len(batch))+`)`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, states...)
	}
	return out, nil
}

func scanReconcileState(sc scanner) (jobs.ReconcileState, error) {
	var r jobs.ReconcileState
	err := sc.Scan(&r.AttemptID, timeCol{&r.LookupAt}, &r.LookupAnswer, &r.ClaimToken, timeCol{&r.ClaimedUntil})
	return r, err
}
