// Command jobsctl is the operator's tool for a jobs database: it shows a job
// as a timeline, lists attempts in doubt, cancels an attempt out of band,
// checks the invariants, purges old jobs (never sooner than the retention
// the service advertises, unless forced) and reports the schema version.
//
// Usage:
//
//	jobsctl [--sqlite PATH | --postgres DSN] [--json] COMMAND [ARGS]
//
// Run jobsctl --help for the commands. The database may also be given in
// JOBS_DSN, in any form --postgres accepts (a postgres:// or postgresql://
// URL, or key=value pairs such as "host=db dbname=app user=jobs"), or as
// sqlite:PATH, or as a SQLite file path starting with /, ./ or ../.
//
// Exit status: 0 on success, 1 when the command failed or found a problem
// (an invariant violated, a refused cancel, a database schema behind or
// ahead of jobsctl's), 2 for bad arguments, and for a purge refused because
// it would forget keys sooner than the service's advertised retention.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
