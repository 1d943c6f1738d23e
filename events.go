package jobs

import (
	"context"
	"time"
)

// EventType names what happened.
type EventType string

// Event types.
const (
	EventJobCreated        EventType = "job.created"
	EventJobReplayed       EventType = "job.replayed"
	EventKeyConflict       EventType = "job.key_conflict"
	EventJobFailed         EventType = "job.failed"
	EventJobCancelled      EventType = "job.cancelled"
	EventAttemptStarted    EventType = "attempt.started"
	EventAttemptRefused    EventType = "attempt.refused"
	EventAttemptRunning    EventType = "attempt.running"
	EventReferenceRecorded EventType = "attempt.reference_recorded" // an unknown attempt learned its provider reference; it stays unknown
	EventAttemptUnknown    EventType = "attempt.unknown"
	EventAttemptSucceeded  EventType = "attempt.succeeded"
	EventAttemptFailed     EventType = "attempt.failed"
	EventAttemptCancelled  EventType = "attempt.cancelled"
	EventRaceLost          EventType = "attempt.race_lost"
	EventResultDropped     EventType = "attempt.result_dropped" // a result arrived after its job was closed: the provider acted, the job took nothing
	EventContractViolation EventType = "attempt.contract_violation"
	EventPurged            EventType = "jobs.purged" // Count jobs and Attempts attempts removed by one Purge
)

// Event types of verification. Package failover adds those of hedging and
// reconciliation, in the same stream (see Manager.Emit).
const (
	EventProviderVerified   EventType = "provider.verified"            // a verification passed
	EventVerificationFailed EventType = "provider.verification_failed" // a verification failed
)

// Event describes one meaningful change, for metrics, traces and audit logs.
// Fields that do not apply are empty.
type Event struct {
	Type      EventType
	Time      time.Time
	JobID     string
	AttemptID string
	WinnerID  string // for EventRaceLost: the attempt that won
	Owner     string
	Kind      string
	Provider  string
	Reason    string
	Err       error         // for refusals: why
	Duration  time.Duration // time spent in the store
	Count     int64         // for EventPurged: jobs removed
	Attempts  int64         // for EventPurged: attempts removed
	Replaces  string        // for EventJobCreated by a key reuse: the job whose key the new one took
}

// Observer receives events. Observe is called synchronously on the caller's
// goroutine after the change is stored; it must be fast and safe for
// concurrent use. A Manager without an Observer does no event work at all.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }
