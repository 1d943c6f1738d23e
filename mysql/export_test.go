package mysql

// The statements of the listings of operators' tools, and the ID bounds
// they use, for the tests of their query plans.
var (
	ListJobsSQL     = listJobsSQL
	CountJobsSQL    = countJobsSQL
	ListAttemptsSQL = listAttemptsSQL
	IDTimePrefix    = idTimePrefix
)
