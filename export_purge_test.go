package jobs

// PurgeQuery returns the statement that selects a purge batch in dialect,
// for tests that check its plan.
func PurgeQuery(dialect string) string {
	if dialect == "postgres" {
		return qPurgePostgres
	}
	return placeholder.ReplaceAllString(qPurgeCandidates, "?$1")
}
