package jobs

// PurgeStatement returns the statement that selects a purge batch in
// dialect, for tests that check its plan.
func PurgeStatement(dialect string) string {
	if dialect == "postgres" {
		return pgPurge
	}
	return sqlitePurgeCandidates
}
