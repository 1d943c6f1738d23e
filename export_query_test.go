package jobs

import "time"

// ListJobsSQL, CountJobsSQL and ListAttemptsSQL are the statements, and
// their arguments, that the SQL stores run for JobLister, JobCounter and
// AttemptLister, for the tests of their query plans.
func ListJobsSQL(d Dialect, q JobQuery) (string, []any) {
	lo, hi := idRange(jobPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	if d == Postgres {
		query := pgListJobs
		if q.Newest {
			query = pgListJobsNewest
		}
		return query, []any{lo, hi, q.Owner, pgTexts(q.States), q.Kind, q.Provider, nullTime(q.CreatedAfter), nullTime(q.CreatedBefore), listLimit(q)}
	}
	query := sqliteListJobs
	if q.Newest {
		query = sqliteListJobsNewest
	}
	return query, []any{lo, hi, q.Owner, sqliteStates(q.States), q.Kind, q.Provider, sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore), listLimit(q)}
}

func CountJobsSQL(d Dialect, q JobQuery) (string, []any) {
	lo, hi := idRange(jobPrefix, "", false, q.CreatedAfter, q.CreatedBefore)
	all := q.CreatedAfter.IsZero() && q.CreatedBefore.IsZero()
	if d == Postgres && all {
		return pgCountAllJobs, []any{q.Owner, pgTexts(q.States), q.Kind, q.Provider}
	}
	if d == SQLite && all {
		return sqliteCountAllJobs, []any{q.Owner, sqliteStates(q.States), q.Kind, q.Provider}
	}
	if d == Postgres {
		return pgCountJobs, []any{lo, hi, q.Owner, pgTexts(q.States), q.Kind, q.Provider, nullTime(q.CreatedAfter), nullTime(q.CreatedBefore)}
	}
	return sqliteCountJobs, []any{lo, hi, q.Owner, sqliteStates(q.States), q.Kind, q.Provider, sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore)}
}

func ListAttemptsSQL(d Dialect, q AttemptQuery) (string, []any) {
	lo, hi := idRange(attemptPrefix, q.After, q.Newest, q.CreatedAfter, q.CreatedBefore)
	pick := func(byRef, byRefNewest, inDoubt, inDoubtNewest, all, allNewest string) string {
		switch {
		case q.ProviderRef != "" && q.Newest:
			return byRefNewest
		case q.ProviderRef != "":
			return byRef
		case inDoubtOnly(q.States) && q.Newest:
			return inDoubtNewest
		case inDoubtOnly(q.States):
			return inDoubt
		case q.Newest:
			return allNewest
		}
		return all
	}
	var query string
	var args []any
	if d == Postgres {
		query = pick(pgListByRef, pgListByRefNewest, pgListInDoubt, pgListInDoubtNewest, pgListAttempts, pgListAttemptsNewest)
		args = []any{lo, hi, q.Provider, pgTexts(q.States), nullTime(q.CreatedAfter), nullTime(q.CreatedBefore), limitOr100(q.Limit)}
	} else {
		query = pick(sqliteListByRef, sqliteListByRefNewest, sqliteListInDoubt, sqliteListInDoubtNewest, sqliteListAttempts, sqliteListAttemptsNewest)
		args = []any{lo, hi, q.Provider, sqliteStates(q.States), sqliteMicros(q.CreatedAfter), sqliteMicros(q.CreatedBefore), limitOr100(q.Limit)}
	}
	if q.ProviderRef != "" {
		args = append(args, q.ProviderRef)
	}
	return query, args
}

// IDAt is an ID as the Manager makes it at t.
func IDAt(prefix string, t time.Time) string { return newID(prefix, t) }
