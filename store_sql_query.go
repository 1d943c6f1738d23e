package jobs

import (
	"strconv"
	"strings"
	"time"
)

// The listings of operators' tools (JobLister, JobCounter, AttemptLister)
// are built for each query from the filters it sets, rather than as one
// constant statement whose every predicate holds when its parameter is
// empty: a predicate such as (id < $7 OR $7 = '') cannot bound an index
// scan, so a deep page would read every row before it. Here each filter is
// a plain comparison, the page's bound (id < $n) bounds the scan of the
// primary key, and ORDER BY id … LIMIT stops it once the page is full.

// sqlQuery builds one statement of a dialect: its text and arguments.
type sqlQuery struct {
	dialect Dialect
	where   []string
	args    []any
}

// arg adds v as an argument and returns its placeholder.
func (b *sqlQuery) arg(v any) string {
	b.args = append(b.args, v)
	n := strconv.Itoa(len(b.args))
	if b.dialect == Postgres {
		return "$" + n
	}
	return "?" + n
}

// time adds t as an argument, as the dialect stores times.
func (b *sqlQuery) time(t time.Time) string {
	if b.dialect == Postgres {
		return b.arg(t)
	}
	return b.arg(t.UnixMicro())
}

// cond adds a condition to the WHERE clause.
func (b *sqlQuery) cond(c string) { b.where = append(b.where, c) }

// in adds "col is one of values".
func (b *sqlQuery) in(col string, values []string) {
	if len(values) == 0 {
		return
	}
	if b.dialect == Postgres {
		b.cond(col + " = ANY (" + b.arg(pgTextArray(values)) + "::text[])")
		return
	}
	ph := make([]string, len(values))
	for i, v := range values {
		ph[i] = b.arg(v)
	}
	b.cond(col + " IN (" + strings.Join(ph, ", ") + ")")
}

// whereClause is " WHERE a AND b", or "" without conditions.
func (b *sqlQuery) whereClause() string {
	if len(b.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(b.where, " AND ")
}

// page adds the keyset bound and returns the ORDER BY … LIMIT clause.
func (b *sqlQuery) page(after string, newest bool, limit int) string {
	if limit <= 0 {
		limit = 100
	}
	order := " ORDER BY id"
	if newest {
		order += " DESC"
		if after != "" {
			b.cond("id < " + b.arg(after))
		}
	} else if after != "" {
		b.cond("id > " + b.arg(after))
	}
	return order + " LIMIT " + b.arg(limit)
}

// idFloor is the least ID that newID makes with prefix at t's millisecond
// or later: IDs begin with their creation's millisecond.
func idFloor(prefix string, t time.Time) string {
	id := newID(prefix, t)
	return id[:len(prefix)+10] + "0000000000000000"
}

// created adds the bounds of an age filter: on the column created_at, and
// the same on the primary key, which sorts by creation time to the
// millisecond (the Manager makes every ID with newID at the time it
// records as created_at), so that a page of old jobs does not walk the
// index through every newer one.
func (b *sqlQuery) created(prefix string, after, before time.Time) {
	if !after.IsZero() {
		b.cond("created_at >= " + b.time(after))
		b.cond("id >= " + b.arg(idFloor(prefix, after)))
	}
	if !before.IsZero() {
		b.cond("created_at < " + b.time(before))
		b.cond("id < " + b.arg(idFloor(prefix, before.Add(time.Millisecond))))
	}
}

// jobFilters adds q's filters, but not its page.
func (b *sqlQuery) jobFilters(q JobQuery) {
	if q.Owner != "" {
		b.cond("owner = " + b.arg(q.Owner))
	}
	states := make([]string, len(q.States))
	for i, s := range q.States {
		states[i] = string(s)
	}
	b.in("state", states)
	if q.Kind != "" {
		b.cond("kind = " + b.arg(q.Kind))
	}
	if q.Provider != "" {
		b.cond("provider = " + b.arg(q.Provider))
	}
	b.created(jobPrefix, q.CreatedAfter, q.CreatedBefore)
}

// listJobsQuery is the statement of ListJobs, unqualified.
func listJobsQuery(d Dialect, q JobQuery) (string, []any) {
	b := &sqlQuery{dialect: d}
	b.jobFilters(q)
	tail := b.page(q.After, q.Newest, q.Limit)
	return "SELECT " + jobCols + " FROM intentjobs_jobs" + b.whereClause() + tail, b.args
}

// countJobsQuery is the statement of CountJobs, unqualified.
func countJobsQuery(d Dialect, q JobQuery) (string, []any) {
	b := &sqlQuery{dialect: d}
	b.jobFilters(q)
	return "SELECT count(*) FROM intentjobs_jobs" + b.whereClause(), b.args
}

// listAttemptsQuery is the statement of ListAttempts, unqualified.
func listAttemptsQuery(d Dialect, q AttemptQuery) (string, []any) {
	b := &sqlQuery{dialect: d}
	if q.ProviderRef != "" {
		// The same predicate as intentjobs_attempts_provider_ref_idx's,
		// so that the planner may use the partial index.
		b.cond("provider_ref = " + b.arg(q.ProviderRef) + " AND provider_ref <> ''")
	}
	if q.Provider != "" {
		b.cond("provider = " + b.arg(q.Provider))
	}
	states := make([]string, len(q.States))
	for i, s := range q.States {
		states[i] = string(s)
	}
	if inDoubtOnly(q.States) {
		// As intentjobs_attempts_one_in_doubt's predicate spells it, for
		// the planner to match the partial index.
		b.cond("state IN ('starting', 'unknown')")
	}
	b.in("state", states)
	b.created(attemptPrefix, q.CreatedAfter, q.CreatedBefore)
	tail := b.page(q.After, q.Newest, q.Limit)
	return "SELECT " + attemptCols + " FROM intentjobs_attempts" + b.whereClause() + tail, b.args
}

// inDoubtOnly reports whether states are all starting or unknown.
func inDoubtOnly(states []AttemptState) bool {
	if len(states) == 0 {
		return false
	}
	for _, s := range states {
		if !s.InDoubt() {
			return false
		}
	}
	return true
}

// reconcileStatesQuery reads the lookups and claims of the attempts ids.
func reconcileStatesQuery(d Dialect, ids []string) (string, []any) {
	b := &sqlQuery{dialect: d}
	b.in("id", ids)
	return "SELECT id, lookup_at, lookup_answer, claim_token, claimed_until FROM intentjobs_attempts" + b.whereClause(), b.args
}

func scanReconcileState(sc scanner) (ReconcileState, error) {
	var r ReconcileState
	err := sc.Scan(&r.AttemptID, dbTime{&r.LookupAt}, &r.LookupAnswer, &r.ClaimToken, dbTime{&r.ClaimedUntil})
	return r, err
}
