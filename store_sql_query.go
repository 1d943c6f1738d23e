package jobs

import "time"

// The listings of operators' tools (JobLister, JobCounter, AttemptLister)
// are constant statements, as every statement of the stores is, shaped so
// that a page of a long list costs what the first page costs: the page's
// bound is one comparison on the primary key, id > $lo AND id < $hi, which
// bounds the scan of its index whatever the plan's parameters, and ORDER
// BY id … LIMIT stops the scan once the page is full. The other filters
// hold when their parameter is empty and are read on the rows the scan
// meets. Without an upper bound, $hi is NULL and the statement takes one
// past the largest ID instead (an index probe). An age filter bounds the
// ID too: the Manager makes every ID with newID at the time it records as
// created_at, and IDs begin with their creation's millisecond.

// idRange returns the bounds of the IDs a page may hold: IDs above lo
// ("" for no lower bound) and below hi (nil for none), from the page
// before's last ID and the age filters.
func idRange(prefix, after string, newest bool, createdAfter, createdBefore time.Time) (lo string, hi any) {
	if after != "" && !newest {
		lo = after
	}
	if !createdAfter.IsZero() {
		// Below every ID made at createdAfter's millisecond or later: its
		// first ten digits, which such IDs extend or exceed.
		lo = max(lo, idTimePrefix(prefix, createdAfter))
	}
	var upper string
	if after != "" && newest {
		upper = after
	}
	if !createdBefore.IsZero() {
		// Above every ID made at createdBefore's millisecond or earlier.
		b := idTimePrefix(prefix, createdBefore.Add(time.Millisecond))
		if upper == "" || b < upper {
			upper = b
		}
	}
	if upper == "" {
		return lo, nil
	}
	return lo, upper
}

// idTimePrefix is the prefix and the ten digits of time that begin every
// ID newID makes with prefix at t's millisecond.
func idTimePrefix(prefix string, t time.Time) string {
	return newID(prefix, t)[:len(prefix)+10]
}

// limitOr100 is limit, or 100 for none.
func limitOr100(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}

// inDoubtOnly reports whether states are all starting or unknown: then a
// listing reads the partial index of the attempts in doubt.
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

func scanReconcileState(sc scanner) (ReconcileState, error) {
	var r ReconcileState
	err := sc.Scan(&r.AttemptID, dbTime{&r.LookupAt}, &r.LookupAnswer, &r.ClaimToken, dbTime{&r.ClaimedUntil})
	return r, err
}
