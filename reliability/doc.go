// Package reliability holds the tests that prove the promise of package jobs
// under faults, many processes, random operation orders and hostile input:
// no duplicate job, no double completion, no late result applied, no lost
// submission. It has no API; see its tests and the README.
package reliability
