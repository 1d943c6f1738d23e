package jobs

// PurgeStatement returns the statement that selects a purge batch in
// dialect, for tests that check its plan.
func PurgeStatement(dialect Dialect) string {
	if dialect == Postgres {
		return pgPurge
	}
	return sqlitePurgeCandidates
}
