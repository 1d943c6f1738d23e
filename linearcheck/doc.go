// Package linearcheck checks recorded histories of a jobs.Store (package
// history) for linearizability against a sequential specification of the
// Store contract, with porcupine.
package linearcheck
