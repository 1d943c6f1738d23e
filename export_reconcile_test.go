package jobs

// StaleAttemptsQuery returns the statement of Store.StaleAttempts in
// dialect, for tests that check its plan.
func StaleAttemptsQuery(dialect string) string {
	if dialect == "postgres" {
		return pgStaleAttempts
	}
	return sqliteStaleAttempts
}
