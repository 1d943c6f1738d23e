// Package inspect is the query layer of operators' tools: it finds any
// intent (by job ID, attempt ID, owner and key, or provider reference),
// lists and counts jobs by filters with keyset pagination, tells a job's
// story (its attempts, their last lookups, its key's chain), lists the
// attempts in doubt with what the reconcilers know of them, and sums up
// each provider's recent attempts. Package console and jobsctl's list and
// count both use it, so that a filter means the same in both.
//
// It works over any jobs.Store through the Manager, and uses the store's
// capabilities for operators' tools where it has them (jobs.JobLister,
// jobs.JobCounter, jobs.AttemptLister, jobs.LookupStore,
// jobs.VerificationStore); where one is missing, the feature that needs it
// returns an error matching errors.ErrUnsupported, or does without (a
// count pages through the list; the attempts in doubt come from the
// reconcilers' jobs.ClaimStore).
package inspect
