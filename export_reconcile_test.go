package jobs

// StaleAttemptsQuery returns the statement of ReconcileStore.StaleAttempts
// in dialect, for tests that check its plan.
func StaleAttemptsQuery(dialect string) string {
	if dialect == "postgres" {
		return qStaleAttempts
	}
	return placeholder.ReplaceAllString(qStaleAttempts, "?$1")
}
