package jobs

// StaleAttemptsQuery returns the statement of Store.StaleAttempts in
// dialect, for tests that check its plan.
func StaleAttemptsQuery(dialect Dialect) string {
	if dialect == Postgres {
		return pgStaleAttempts
	}
	return sqliteStaleAttempts
}
