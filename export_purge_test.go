package jobs

// PurgeStatement returns the statement that selects a purge batch in dialect,
// for tests that check its plan.
func PurgeStatement(dialect string) string {
	if dialect == "postgres" {
		return qPurgePostgres
	}
	return placeholder.ReplaceAllString(qPurgeCandidates, "?$1")
}
