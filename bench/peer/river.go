// Package peer runs the benchmark's Submit workloads against River's unique
// insert, a job queue that enforces uniqueness in SQL the same way.
package peer

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/intentjobs/jobs/internal/perf"
)

// chargeArgs is the benchmark intent as River job arguments. With
// UniqueOpts.ByArgs, all of it (owner, key and params) makes the unique key.
type chargeArgs struct {
	Owner    string `json:"owner"`
	Key      string `json:"key"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func (chargeArgs) Kind() string { return "charge" }

// River submits with River's unique insert through an insert-only client.
type River[TTx any] struct {
	client *river.Client[TTx]
	count  func(ctx context.Context, owner string) (int, error)
	close  func()
}

// Name implements perf.Contender.
func (r *River[TTx]) Name() string { return "river" }

var uniqueByArgs = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

// Submit implements perf.Contender.
func (r *River[TTx]) Submit(ctx context.Context, owner, key string) (string, bool, error) {
	res, err := r.client.Insert(ctx, chargeArgs{Owner: owner, Key: key, Amount: 1200, Currency: "eur"}, uniqueByArgs)
	if err != nil {
		return "", false, err
	}
	return strconv.FormatInt(res.Job.ID, 10), !res.UniqueSkippedAsDuplicate, nil
}

// CountJobs implements perf.JobCounter.
func (r *River[TTx]) CountJobs(ctx context.Context, owner string) (int, error) {
	return r.count(ctx, owner)
}

// Close releases the peer's connections.
func (r *River[TTx]) Close() { r.close() }

// Closer is a contender with connections of its own.
type Closer interface {
	perf.Contender
	Close()
}

// OpenRiver returns River on the environment's database: through
// riverpgxv5 and a pgx pool of its own on PostgreSQL (in the same schema),
// through riversqlite on SQLite (the same file, one connection with the
// library's settings, as River's documentation advises). It applies River's
// migrations.
func OpenRiver(ctx context.Context, e *perf.Env) (Closer, error) {
	if e.Dialect == "postgres" {
		cfg, err := pgxpool.ParseConfig(e.DSN)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = perf.MaxPostgresConns
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		r, err := newRiver(ctx, riverpgxv5.New(pool), func(ctx context.Context, owner string) (n int, err error) {
			err = pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'owner' = $1`, owner).Scan(&n)
			return n, err
		}, pool.Close)
		if err != nil {
			pool.Close()
		}
		return r, err
	}
	db, err := sql.Open("sqlite3", e.DSN+"?"+perf.SQLiteParams)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	r, err := newRiver(ctx, riversqlite.New(db), func(ctx context.Context, owner string) (n int, err error) {
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE json_extract(args, '$.owner') = ?`, owner).Scan(&n)
		return n, err
	}, func() { db.Close() })
	if err != nil {
		db.Close()
	}
	return r, err
}

func newRiver[TTx any](ctx context.Context, d riverdriver.Driver[TTx], count func(context.Context, string) (int, error), closeFn func()) (*River[TTx], error) {
	m, err := rivermigrate.New(d, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	client, err := river.NewClient(d, &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return &River[TTx]{client: client, count: count, close: closeFn}, nil
}
