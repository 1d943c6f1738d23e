// Command jobsctl is the operator's tool for a jobs database: it shows a job
// as a timeline, lists attempts in doubt, cancels an attempt out of band,
// checks the invariants, purges old jobs and reports the schema version.
//
// Usage:
//
//	jobsctl [--sqlite PATH | --postgres DSN] [--json] COMMAND [ARGS]
//
// Run jobsctl --help for the commands. The database may also be given in
// JOBS_DSN: a postgres:// URL, or sqlite:PATH.
//
// Exit status: 0 on success, 1 when the command failed or found a problem
// (an invariant violated, a refused cancel), 2 for bad arguments.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
