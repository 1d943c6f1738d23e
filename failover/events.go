package failover

import "github.com/intentjobs/jobs"

// Event types of hedging and reconciliation. Runners and Reconcilers emit
// them through their Manager (jobs.Manager.Emit), so that they reach its
// Observer in the same stream as the Manager's own events.
const (
	EventHedgeStarted         jobs.EventType = "attempt.hedge_started"  // a Runner started a hedge after a silence
	EventAttemptReconciled    jobs.EventType = "attempt.reconciled"     // a Reconciler resolved an attempt
	EventAttemptNeedsOperator jobs.EventType = "attempt.needs_operator" // a Reconciler cannot resolve an attempt in doubt: its provider cannot look it up
)
