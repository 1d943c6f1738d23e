// Package reliability holds the tests that prove the promise of package jobs
// under faults, many processes, random operation orders and hostile input:
// no duplicate job, no double completion, no late result applied, no lost
// submission. It has no API; docs/reliability.md in the repository says
// what each test does and how to run it longer.
package reliability
