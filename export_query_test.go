package jobs

import "time"

// ListJobsSQL, CountJobsSQL and ListAttemptsSQL are the statements the SQL
// stores run for JobLister, JobCounter and AttemptLister, for the tests
// of their query plans.
func ListJobsSQL(d Dialect, q JobQuery) (string, []any) { return listJobsQuery(d, q) }

func CountJobsSQL(d Dialect, q JobQuery) (string, []any) { return countJobsQuery(d, q) }

func ListAttemptsSQL(d Dialect, q AttemptQuery) (string, []any) { return listAttemptsQuery(d, q) }

// IDAt is an ID as the Manager makes it at t.
func IDAt(prefix string, t time.Time) string { return newID(prefix, t) }
