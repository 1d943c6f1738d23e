// Package ablation holds the variants of PostgreSQL's Complete statement
// that run.sh times with pgbench on the server alone, and that the
// benchmark's report runs as contenders (perf.OpenCompleteVariant): the
// same files, so that both price the same statements.
package ablation

import "embed"

// Statements are the variants, one NAME.sql each, with $1 the attempt, $2
// the result, $3 the time, $4 a claim token and $5-$7 the pieces of the
// loser's reason (see run.sh).
//
//go:embed *.sql
var Statements embed.FS
