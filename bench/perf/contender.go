package perf

import (
	"context"
	"encoding/json"
)

// Contender records intents one way, in a Database of its own.
type Contender interface {
	// Name is "jobs" for the library, "sql" or "sql-tx" for the baseline,
	// or a peer's name.
	Name() string
	// Runs reports whether the contender takes part in workload w.
	Runs(w Workload) bool
	// Submit records the intent to charge with params for owner under
	// key, once. It returns the job's ID and whether this call created it.
	Submit(ctx context.Context, owner, key string, params json.RawMessage) (id string, created bool, err error)
	// CountJobs returns how many jobs owner has.
	CountJobs(ctx context.Context, owner string) (int, error)
	// RoundTrips returns how many requests the contender has sent to
	// PostgreSQL so far (0 on SQLite).
	RoundTrips() int64
	// Close releases the contender's connections.
	Close() error
}

// Lifecycle is a contender that also runs attempts, on jobs and attempts
// tables that the workloads can prefill and check.
type Lifecycle interface {
	Contender
	// StartRunning starts an attempt of the pending job and records it as
	// acknowledged by the provider (StartAttempt + MarkRunning).
	StartRunning(ctx context.Context, jobID string) (attemptID string, err error)
	// Complete offers the attempt's result; won reports whether it
	// completed the job (false: another attempt had).
	Complete(ctx context.Context, attemptID string, result json.RawMessage) (won bool, err error)
	// Tables are the contender's jobs and attempts.
	Tables() *Tables
}
