// Package peer runs the benchmark's Submit workloads against River's unique
// insert, a job queue that enforces uniqueness in SQL the same way.
package peer

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/intentjobs/jobs/bench/perf"
)

// chargeArgs is the benchmark intent as River job arguments. With
// UniqueOpts.ByArgs, all of it (owner, key and params) makes the unique key.
type chargeArgs struct {
	Owner  string          `json:"owner"`
	Key    string          `json:"key"`
	Params json.RawMessage `json:"params"`
}

func (chargeArgs) Kind() string { return "charge" }

// River submits with River's unique insert through an insert-only client.
type River[TTx any] struct {
	client *river.Client[TTx]
	count  func(ctx context.Context, owner string) (int, error)
	close  func()
	warm   func(ctx context.Context, n int) error // PostgreSQL only
	reset  func()                                 // PostgreSQL only
	trips  *atomic.Int64                          // PostgreSQL only
}

// Name implements perf.Contender.
func (r *River[TTx]) Name() string { return "river" }

// WarmConns implements perf.ConnWarmer.
func (r *River[TTx]) WarmConns(ctx context.Context, n int) error {
	if r.warm == nil {
		return nil
	}
	return r.warm(ctx, n)
}

// CloseIdleConns implements perf.ConnWarmer.
func (r *River[TTx]) CloseIdleConns() {
	if r.reset != nil {
		r.reset()
	}
}

// Runs implements perf.Contender: River runs the Submit workloads on tables
// of its own, which it does not let the workloads prefill, and has no
// racing attempts to complete.
func (r *River[TTx]) Runs(w perf.Workload) bool { return !w.NeedsTables() }

var uniqueByArgs = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}

// Submit implements perf.Contender.
func (r *River[TTx]) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	res, err := r.client.Insert(ctx, chargeArgs{Owner: owner, Key: key, Params: params}, uniqueByArgs)
	if err != nil {
		return "", false, err
	}
	return strconv.FormatInt(res.Job.ID, 10), !res.UniqueSkippedAsDuplicate, nil
}

// CountJobs implements perf.Contender.
func (r *River[TTx]) CountJobs(ctx context.Context, owner string) (int, error) {
	return r.count(ctx, owner)
}

// RoundTrips implements perf.Contender.
func (r *River[TTx]) RoundTrips() int64 {
	if r.trips == nil {
		return 0
	}
	return r.trips.Load()
}

// Close implements perf.Contender.
func (r *River[TTx]) Close() error {
	r.close()
	return nil
}

// OpenRiver returns River on a database of its own: through riverpgxv5 and
// a pgx pool on PostgreSQL, whose round trips it counts; through riversqlite
// on SQLite, over one connection with the settings every contender uses, as
// River's documentation advises. It applies River's migrations.
func OpenRiver(ctx context.Context, db perf.Database) (perf.Contender, error) {
	if db.Dialect == perf.Postgres {
		cfg, err := pgxpool.ParseConfig(db.DSN)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = perf.MaxPostgresConns
		trips := new(atomic.Int64)
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &perf.CountingConn{Conn: c, N: trips}, nil
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		warm := func(ctx context.Context, n int) error {
			conns := make([]*pgxpool.Conn, 0, n)
			defer func() {
				for _, c := range conns {
					c.Release()
				}
			}()
			for range min(n, perf.MaxPostgresConns) {
				c, err := pool.Acquire(ctx)
				if err != nil {
					return err
				}
				conns = append(conns, c)
			}
			return nil
		}
		r, err := newRiver(ctx, riverpgxv5.New(pool), func(ctx context.Context, owner string) (n int, err error) {
			err = pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'owner' = $1`, owner).Scan(&n)
			return n, err
		}, pool.Close)
		if err != nil {
			pool.Close()
			return nil, err
		}
		r.trips, r.warm, r.reset = trips, warm, pool.Reset
		return r, nil
	}
	sdb, err := sql.Open("sqlite3", db.DSN+"?"+perf.SQLiteParams(db.Synchronous))
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(1)
	if err := perf.CheckSynchronous(ctx, sdb, db.Synchronous); err != nil {
		sdb.Close()
		return nil, err
	}
	r, err := newRiver(ctx, riversqlite.New(sdb), func(ctx context.Context, owner string) (n int, err error) {
		err = sdb.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE json_extract(args, '$.owner') = ?`, owner).Scan(&n)
		return n, err
	}, func() { sdb.Close() })
	if err != nil {
		sdb.Close()
		return nil, err
	}
	return r, nil
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
