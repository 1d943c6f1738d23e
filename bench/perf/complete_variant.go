package perf

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/bench/ablation"
)

// CompleteVariant completes attempts on PostgreSQL with one of the
// statements of bench/ablation (the ones run.sh times with pgbench), on the
// library's schema: the library's one-statement Complete and variants of it
// with one thing taken away, so that a report prices each. It runs only
// the ablation workloads that complete attempts.
type CompleteVariant struct {
	name    string
	query   string
	pool    *sql.DB
	tables  *Tables
	trips   atomic.Int64
	reasons [3]string // $5-$7: the pieces of a loser's reason
}

// The variants, by contender name and the file of bench/ablation each runs.
var completeVariants = map[string]string{
	CompleteLibrary:     "library.sql",
	CompleteUnlockedJob: "library-unlocked-job.sql",
	CompleteNarrow:      "library-narrow.sql",
}

// The names of the Complete variants.
const (
	// CompleteLibrary is pgCompleteAttempt, the one statement the library
	// runs where it cannot send two together: the attempt and the job read
	// with FOR UPDATE, the whole job returned.
	CompleteLibrary = "pg-complete"
	// CompleteUnlockedJob reads the job without FOR UPDATE: a loser may
	// then not learn who won (unsafe, for pricing only).
	CompleteUnlockedJob = "pg-complete-unlocked-job"
	// CompleteNarrow returns 4 columns of the job rather than 16.
	CompleteNarrow = "pg-complete-narrow"
)

// Unsafe reports whether the contender named so breaks a guarantee on
// purpose, to price it: its violations are expected.
func Unsafe(name string) bool { return name == CompleteUnlockedJob }

// CompleteVariants are the names of the variants, the library's first.
var CompleteVariants = []string{CompleteLibrary, CompleteUnlockedJob, CompleteNarrow}

// OpenCompleteVariant applies the library's schema to db (PostgreSQL) and
// returns the variant name.
func OpenCompleteVariant(ctx context.Context, db Database, name string) (*CompleteVariant, error) {
	if err := db.validate(); err != nil {
		return nil, err
	}
	file, ok := completeVariants[name]
	if !ok || db.Dialect != Postgres {
		return nil, fmt.Errorf("complete variant %q on %s: want one of %v on %s", name, db.Dialect, CompleteVariants, Postgres)
	}
	q, err := fs.ReadFile(ablation.Statements, file)
	if err != nil {
		return nil, err
	}
	// The library's reasons: "result dropped: attempt <winner> completed
	// the job first", or "result dropped: job <state>".
	c := &CompleteVariant{name: name, query: strings.TrimSpace(string(q)),
		reasons: [3]string{"result dropped: attempt ", " completed the job first", "result dropped: job "}}
	if c.pool, err = openPostgres(db.DSN, &c.trips); err != nil {
		return nil, err
	}
	if _, err := jobs.NewPostgresStore(ctx, c.pool); err != nil {
		c.pool.Close()
		return nil, err
	}
	c.tables = newTables(Postgres, c.pool, c.pool, librarySchemas[Postgres])
	return c, nil
}

// Name implements Contender.
func (c *CompleteVariant) Name() string { return c.name }

// Runs implements Contender: the ablation workloads that complete attempts.
func (c *CompleteVariant) Runs(w Workload) bool { return w.Kind == Complete && w.Ablation }

// Submit implements Contender; a variant does not submit.
func (c *CompleteVariant) Submit(context.Context, string, string, json.RawMessage) (string, bool, error) {
	return "", false, errors.New("a Complete variant does not submit")
}

// StartRunning implements Lifecycle; a variant does not start attempts.
func (c *CompleteVariant) StartRunning(context.Context, string) (string, error) {
	return "", errors.New("a Complete variant does not start attempts")
}

// Complete implements Lifecycle: the statement's last column says whether
// the attempt won.
func (c *CompleteVariant) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	rows, err := c.pool.QueryContext(ctx, c.query, attemptID, string(result), time.Now(), "",
		c.reasons[0], c.reasons[1], c.reasons[2])
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return false, err
		}
		return false, fmt.Errorf("complete %s: attempt not open", attemptID)
	}
	cols, err := rows.Columns()
	if err != nil {
		return false, err
	}
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(any)
	}
	var won bool
	dest[len(dest)-1] = &won
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	return won, rows.Err()
}

// CountJobs implements Contender.
func (c *CompleteVariant) CountJobs(ctx context.Context, owner string) (int, error) {
	return c.tables.CountJobs(ctx, owner)
}

// Tables implements Lifecycle.
func (c *CompleteVariant) Tables() *Tables { return c.tables }

// RoundTrips implements Contender.
func (c *CompleteVariant) RoundTrips() int64 { return c.trips.Load() }

// CloseIdleConns implements ConnWarmer.
func (c *CompleteVariant) CloseIdleConns() { closeIdle(c.pool) }

// WarmConns implements ConnWarmer.
func (c *CompleteVariant) WarmConns(ctx context.Context, n int) error {
	return warmPool(ctx, Postgres, c.pool, n)
}

// Close implements Contender.
func (c *CompleteVariant) Close() error { return c.pool.Close() }
