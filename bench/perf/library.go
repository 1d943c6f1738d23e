package perf

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/intentjobs/jobs"
)

// Library is the jobs Manager, on a store opened as its users open it: on
// PostgreSQL over a pgx pool (NewPostgresStore, as OpenPostgres does), on
// SQLite with OpenSQLite (one writer connection, a pool of readers).
type Library struct {
	name   string
	direct bool // Submit calls the store's CreateJob, without the Manager
	M      *jobs.Manager
	Store  jobs.SQLStore
	tables *Tables
	trips  atomic.Int64
	owned  []*sql.DB
}

// The library's own schema, as the workloads prefill it.
var librarySchemas = map[string]schema{
	Postgres: {
		jobs:         "intentjobs_jobs",
		attempts:     "intentjobs_attempts",
		jobCols:      ", fingerprint, version, attempt_count, created_at, updated_at",
		jobVals:      ", md5(random()::text) || md5(random()::text), 1, 0, now(), now()",
		attemptCols:  ", seq, hedge, created_at, updated_at",
		attemptVals:  ", CASE WHEN $2 = 'a' THEN 1 ELSE 2 END, $2 = 'b', now(), now()",
		raceJobState: "running",
		afterRaces:   `UPDATE intentjobs_jobs SET attempt_count = 2 WHERE owner = $1`,
	},
	SQLite: {
		jobs:     "intentjobs_jobs",
		attempts: "intentjobs_attempts",
		jobCols:  ", fingerprint, version, attempt_count, created_at, updated_at",
		jobVals: ", lower(hex(randomblob(32))), 1, 0, CAST(unixepoch('subsec') * 1000000 AS INTEGER)," +
			" CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
		attemptCols: ", seq, hedge, created_at, updated_at",
		attemptVals: ", CASE WHEN $2 = 'a' THEN 1 ELSE 2 END, $2 = 'b', CAST(unixepoch('subsec') * 1000000 AS INTEGER)," +
			" CAST(unixepoch('subsec') * 1000000 AS INTEGER)",
		raceJobState: "running",
		afterRaces:   `UPDATE intentjobs_jobs SET attempt_count = 2 WHERE owner = $1`,
	},
}

// OpenLibrary opens the library's store on db and applies its schema. On
// SQLite it checks that the writer really commits with db.Synchronous.
func OpenLibrary(ctx context.Context, db Database) (*Library, error) {
	return openLibrary(ctx, db, "jobs", false)
}

// The library with one of its parts switched off, for the ablation
// workloads (Workload.Ablation) only:
//   - "jobs-no-checks": its schema's CHECK constraints are not evaluated
//     (on SQLite PRAGMA ignore_check_constraints on the writer, on
//     PostgreSQL the constraints dropped), JobsNoChecks;
//   - "jobs-store": Submit calls the store's CreateJob with a job the
//     benchmark builds (the params as given, a SHA-256 of them as the
//     fingerprint), without the Manager's validation, canonical form,
//     fingerprint and events, OpenLibraryStore.
//   - "jobs-no-notify": on PostgreSQL, the trigger that notifies a closed
//     job's waiters dropped (it calls nothing unless a waiter marked the
//     job, but is evaluated for every close), JobsNoNotify.
const (
	JobsNoChecks = "jobs-no-checks"
	JobsStore    = "jobs-store"
	JobsNoNotify = "jobs-no-notify"
)

// noChecks is the SQL that stops the library's schema's CHECK constraints
// from being evaluated.
var noChecks = map[string]string{
	SQLite: `PRAGMA ignore_check_constraints = ON`,
	Postgres: `ALTER TABLE intentjobs_jobs DROP CONSTRAINT intentjobs_jobs_state_check,
    DROP CONSTRAINT intentjobs_jobs_winner_check, DROP CONSTRAINT intentjobs_jobs_closed_check;
  ALTER TABLE intentjobs_attempts DROP CONSTRAINT intentjobs_attempts_state_check,
    DROP CONSTRAINT intentjobs_attempts_finished_check`,
}

// OpenLibraryVariant opens the library with a part switched off: name is
// JobsNoChecks, JobsStore or (PostgreSQL) JobsNoNotify.
func OpenLibraryVariant(ctx context.Context, db Database, name string) (*Library, error) {
	switch name {
	case JobsNoNotify:
		if db.Dialect != Postgres {
			return nil, fmt.Errorf("%s: PostgreSQL only", name)
		}
		db.AlterLibrary = `DROP TRIGGER intentjobs_notify_closed ON intentjobs_jobs`
		return openLibrary(ctx, db, name, false)
	case JobsNoChecks:
		db.AlterLibrary = noChecks[db.Dialect]
		return openLibrary(ctx, db, name, false)
	case JobsStore:
		return openLibrary(ctx, db, name, true)
	}
	return nil, fmt.Errorf("library variant %q: want %s or %s", name, JobsNoChecks, JobsStore)
}

func openLibrary(ctx context.Context, db Database, name string, direct bool) (*Library, error) {
	if err := db.validate(); err != nil {
		return nil, err
	}
	l := &Library{name: name, direct: direct}
	switch db.Dialect {
	case Postgres:
		pool, err := openPostgres(db.DSN, &l.trips)
		if err != nil {
			return nil, err
		}
		l.owned = append(l.owned, pool)
		if l.Store, err = jobs.NewPostgresStore(ctx, pool); err != nil {
			l.Close()
			return nil, err
		}
		l.tables = newTables(Postgres, pool, pool, librarySchemas[Postgres])
	case SQLite:
		s, err := jobs.OpenSQLite(ctx, db.DSN+"?_sync="+db.Synchronous)
		if err != nil {
			return nil, err
		}
		l.Store = s
		if err := CheckSynchronous(ctx, s.DB(), db.Synchronous); err != nil {
			l.Close()
			return nil, err
		}
		r, err := openSQLiteReader(db.DSN, db.Synchronous)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.owned = append(l.owned, r)
		l.tables = newTables(SQLite, s.DB(), r, librarySchemas[SQLite])
	}
	if db.AlterLibrary != "" {
		if _, err := l.Store.DB().ExecContext(ctx, db.AlterLibrary); err != nil {
			l.Close()
			return nil, fmt.Errorf("alter the library's schema: %w", err)
		}
	}
	// Lost races are logged to a discarding handler: the benchmark measures
	// the database work, not a log sink.
	m, err := jobs.New(l.Store, jobs.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		l.Close()
		return nil, err
	}
	l.M = m
	return l, nil
}

// Name implements Contender.
func (l *Library) Name() string { return l.name }

// Runs implements Contender: the library runs every workload, its variants
// the ablation workloads.
func (l *Library) Runs(w Workload) bool { return l.name == "jobs" || w.Ablation }

// Submit implements Contender.
func (l *Library) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	if l.direct {
		now := time.Now()
		j, created, err := l.Store.CreateJob(ctx, jobs.Job{ID: newID("job_"), Owner: owner, Key: key, Kind: "charge",
			Provider: "psp", Params: params, Fingerprint: hex.EncodeToString(leanHash(params)), State: jobs.JobPending,
			Version: 1, CreatedAt: now, UpdatedAt: now})
		return j.ID, created, err
	}
	j, created, err := l.M.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: key, Kind: "charge", Provider: "psp", Params: params})
	return j.ID, created, err
}

// StartRunning implements Lifecycle.
func (l *Library) StartRunning(ctx context.Context, jobID string) (string, error) {
	a, err := l.M.StartAttempt(ctx, jobID, "")
	if err != nil {
		return "", err
	}
	if _, err := l.M.MarkRunning(ctx, a.ID, "ref-"+a.ID); err != nil {
		return "", err
	}
	return a.ID, nil
}

// Complete implements Lifecycle.
func (l *Library) Complete(ctx context.Context, attemptID string, result json.RawMessage) (bool, error) {
	_, err := l.M.Complete(ctx, attemptID, result)
	if errors.Is(err, jobs.ErrLostRace) {
		return false, nil
	}
	return err == nil, err
}

// CountJobs implements Contender.
func (l *Library) CountJobs(ctx context.Context, owner string) (int, error) {
	return l.tables.CountJobs(ctx, owner)
}

// Tables implements Lifecycle.
func (l *Library) Tables() *Tables { return l.tables }

// CloseIdleConns implements ConnWarmer.
func (l *Library) CloseIdleConns() { closeIdle(l.Store.DB()) }

// WarmConns implements ConnWarmer.
func (l *Library) WarmConns(ctx context.Context, n int) error {
	return warmPool(ctx, l.tables.dialect, l.Store.DB(), n)
}

// RoundTrips implements Contender.
func (l *Library) RoundTrips() int64 { return l.trips.Load() }

// Close implements Contender.
func (l *Library) Close() error {
	var err error
	if l.Store != nil {
		err = l.Store.Close()
	}
	return errors.Join(err, closeAll(l.owned...))
}
