package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver, which OpenPostgres opens
	"github.com/jmoiron/sqlx"
)

// The PostgreSQL store, in files named after what they hold:
//   - store_postgres.go (this file): the type, opening, and the methods, in
//     the order of the Store contract, then of the capabilities;
//   - store_postgres_sql.go: every statement, in the order of the methods;
//   - store_postgres_pgx.go: running statements through pgx itself, and
//     scanning into pgx's types;
//   - store_postgres_pipeline.go: Complete's two statements in one round
//     trip;
//   - store_postgres_listen.go: Manager.Wait through LISTEN/NOTIFY;
//   - store_postgres_errors.go: PostgreSQL's error codes to this package's
//     errors.
// What both SQL stores share is in store_sql.go, the migration runner in
// migrate.go.

// PostgresStore is the Store on PostgreSQL, through pgx's database/sql
// driver. Every write is one statement: Submit an INSERT … ON CONFLICT that
// also returns an existing row, StartAttempt a guarded update of the job
// joined to the attempt's insert, Complete the compare-and-swap of cas.go.
// Concurrent writers, in this process or others, are ordered by row locks,
// and every guard is re-checked by PostgreSQL on the row it finally locks.
// Manager.Wait is woken by LISTEN/NOTIFY (see NotifyClosed).
type PostgresStore struct {
	sqlHandles
	q        *pgStatements // the statements, qualified by Schema if given
	schema   string        // Schema's name, or "" for the search_path's
	listener closeListener // shared by the waiters of Manager.Wait
	keys     keyStreak     // CreateJob's recent keys: new ones in a row
}

// OpenPostgres connects to PostgreSQL through pgx's database/sql driver and
// applies the schema (see Migrations). dsn is a pgx connection string, e.g.
// "postgres://app@db:5432/app?sslmode=disable". The tables go in the schema
// the connection's search_path names first, or in a schema of their own
// with the option Schema. Close the store to close the connection pool.
func OpenPostgres(ctx context.Context, dsn string, opts ...PostgresOption) (*PostgresStore, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, &StorageError{Op: "open postgres", Kind: StorageUnavailable, Message: err.Error()}
	}
	s, err := NewPostgresStore(ctx, db, opts...)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.owned = append(s.owned, db)
	return s, nil
}

// NewPostgresStore returns a store over the caller's PostgreSQL database,
// opened with the "pgx" driver (sql.Open("pgx", dsn), or
// stdlib.OpenDBFromPool to share a pgxpool with the application), and
// applies the schema. The caller keeps ownership of db.
func NewPostgresStore(ctx context.Context, db *sql.DB, opts ...PostgresOption) (*PostgresStore, error) {
	cfg := readPostgresOptions(opts)
	s := &PostgresStore{sqlHandles: sqlHandles{db: db, rdb: db}, q: pgSearchPathStatements}
	if cfg.schema != nil {
		name := *cfg.schema
		switch {
		case name == "":
			return nil, invalid("Schema", "empty")
		case len(name) > 63:
			return nil, invalid("Schema", "%d bytes, longer than PostgreSQL's names (63)", len(name))
		case strings.ContainsRune(name, 0):
			return nil, invalid("Schema", "holds a NUL byte")
		}
		s.schema, s.q = name, newPgStatements(pgx.Identifier{name}.Sanitize())
	}
	s.listener.q = s.q
	if cfg.listenDSN != nil {
		if *cfg.listenDSN == "" {
			return nil, invalid("ListenDSN", "empty")
		}
		lc, err := pgx.ParseConfig(*cfg.listenDSN)
		if err != nil {
			return nil, invalid("ListenDSN", "%v", err)
		}
		s.listener.config = lc
	}
	if err := checkSchema(ctx, s, cfg.storeConfig, s.migrationPlan().development, s.migrate); err != nil {
		return nil, err
	}
	return s, nil
}

// NewPostgresStoreSQLX is NewPostgresStore for an *sqlx.DB.
func NewPostgresStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...PostgresOption) (*PostgresStore, error) {
	return NewPostgresStore(ctx, db.DB, opts...)
}

// Dialect returns Postgres.
func (s *PostgresStore) Dialect() Dialect { return Postgres }

// Close stops the listening connection and closes the database handles the
// store opened itself. Handles passed in by the caller are left open.
func (s *PostgresStore) Close() error {
	s.listener.close()
	return s.closeOwned()
}

// migrate applies the schema in one transaction under an advisory lock,
// one per schema, so that tests in separate schemas do not wait for each
// other.
func (s *PostgresStore) migrate(ctx context.Context) error {
	return migrate(ctx, s.db, s, s.migrationPlan())
}

// migrationPlan is how the store applies its migrations.
func (s *PostgresStore) migrationPlan() migrationPlan {
	return migrationPlan{
		dialect: Postgres,
		begin:   "BEGIN",
		setup:   s.migrationSetup,
		development: developmentSchema{
			detect:     pgIsDevelopment,
			detectArgs: []any{s.inSchema("jobs_schema_migrations"), s.inSchema("intentjobs_schema_migrations")},
			latest:     6,
			upgrade:    pgUpgradeDevelopment,
		},
	}
}

// inSchema returns the name of table, qualified by the store's schema if
// it has one, as an argument for to_regclass.
func (s *PostgresStore) inSchema(table string) string {
	if s.q.schema == "" {
		return table
	}
	return s.q.schema + "." + table
}

// migrationSetup runs at the start of the migration's transaction on conn:
// it waits for the other openers of the same schema and, for a store
// opened with Schema, makes the schema if it is missing and applies the
// migrations in it.
func (s *PostgresStore) migrationSetup(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, pgMigrateLock, s.schema); err != nil || s.schema == "" {
		return err
	}
	var missing bool
	if err := conn.QueryRowContext(ctx, pgSchemaMissing, s.schema).Scan(&missing); err != nil {
		return err
	}
	if missing {
		if _, err := conn.ExecContext(ctx, pgCreateSchema+s.q.schema); err != nil {
			return err
		}
	}
	_, err := conn.ExecContext(ctx, pgUseSchema, s.q.schema)
	return err
}

// DatabaseSchemaVersion implements SQLStore.
func (s *PostgresStore) DatabaseSchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.db, s, s.q.schemaVersion)
}

// AppliedMigrations implements SQLStore.
func (s *PostgresStore) AppliedMigrations(ctx context.Context) ([]AppliedMigration, error) {
	return appliedMigrations(ctx, s.db, s, s.q.appliedMigrations)
}

// CreateJob implements Store: one statement, pgCreateJob, that inserts the
// job or returns the one holding its key, unless the keys of late make
// another cheaper (keyStreak). After a streak of new keys it tries the
// plain insert first, after a streak of taken keys (retries, storms) the
// read of the key; either falls through to pgCreateJob when it misses.
func (s *PostgresStore) CreateJob(ctx context.Context, j Job) (Job, bool, error) {
	h := pgHandle{pool: s.db}
	switch {
	case s.keys.newKeys():
		var inserted bool
		err := pgQueryRow(ctx, h, s.q.insertJob,
			j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt).Scan(&inserted)
		switch {
		case err == nil:
			return j, true, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("create job", err)
		}
	case s.keys.takenKeys():
		got, err := pgReadJobByKey(ctx, h, s.q.jobByKey, j.Owner, j.Key)
		switch {
		case err == nil:
			s.keys.record(false)
			return got, false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("get job by key", err)
		}
	}
	got, created, err := s.createJob(ctx, h, j)
	if err == nil {
		s.keys.record(created)
	}
	return got, created, err
}

// createJob inserts j, or reads the job that holds its key. A new job is
// j as sent: the statement returns only that it inserted it.
func (s *PostgresStore) createJob(ctx context.Context, h pgHandle, j Job) (Job, bool, error) {
	for range maxRetries {
		var got struct {
			pgJob
			created bool
			d       [17]any
		}
		err := pgQueryRow(ctx, h, s.q.createJob,
			j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt).Scan(append(got.dest(got.d[:0]), &got.created)...)
		created := got.created
		switch {
		case err == nil && created:
			return j, true, nil
		case err == nil:
			return got.job(), false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Job{}, false, s.interpret("create job", err)
		}
		// A duplicate whose row the statement could not see: it committed
		// after the statement began. A new statement sees it.
		if found, err := pgReadJobByKey(ctx, h, s.q.jobByKey, j.Owner, j.Key); !errors.Is(err, sql.ErrNoRows) {
			return found, false, s.interpret("get job by key", err)
		}
		// Deleted in between (retention): insert again.
	}
	return Job{}, false, errKeptChanging("create job")
}

// ReplaceJob implements Store: one statement, pgReplaceJob, retires the
// old job's key and inserts the new job, or says which attempt blocks it.
func (s *PostgresStore) ReplaceJob(ctx context.Context, r JobReplacement) (Job, bool, error) {
	if err := r.Check(); err != nil {
		return Job{}, false, err
	}
	j := r.New
	a, b, c := jobStates(r.From)
	var blocker AttemptInFlightError
	got, err := scanJobAnd(s.db.QueryRowContext(ctx, s.q.replaceJob,
		j.ID, j.Owner, j.Key, j.Kind, j.Provider, string(j.Params), j.Fingerprint, j.CreatedAt,
		RetiredKey(j.Key, j.ID), r.OldID, a, b, c), &blocker.AttemptID, &blocker.State)
	switch {
	case err == nil && blocker.AttemptID != "":
		blocker.JobID = r.OldID
		return Job{}, false, &blocker
	case !errors.Is(err, sql.ErrNoRows):
		return got, err == nil, s.interpret("replace job", err)
	}
	// Nothing retired: the key is another job's now, or free.
	return s.CreateJob(ctx, j)
}

// Job implements Store.
func (s *PostgresStore) Job(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, s.db, s, "get job", jobNotFound(id), scanJob, s.q.jobByID, id)
}

// JobByKey implements Store.
func (s *PostgresStore) JobByKey(ctx context.Context, owner, key string) (Job, error) {
	return queryOne(ctx, s.db, s, "get job by key", errNoJobForKey, scanJob, s.q.jobByKey, owner, key)
}

// CloseJob implements Store.
func (s *PostgresStore) CloseJob(ctx context.Context, c JobClose) (Job, error) {
	if err := c.Check(); err != nil {
		return Job{}, err
	}
	for range maxRetries {
		j, err := scanJob(s.db.QueryRowContext(ctx, s.q.closeJob, c.ID, string(c.To), c.Reason, c.At, c.To == JobFailed))
		if !errors.Is(err, sql.ErrNoRows) {
			return j, s.interpret("close job", err)
		}
		if err := s.explain(ctx, func(r rowReader) error { return whyNotClosed(ctx, r, c) }); err != nil {
			return Job{}, err
		}
	}
	return Job{}, errKeptChanging("close job")
}

// Attempt implements Store.
func (s *PostgresStore) Attempt(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, s.db, s, "get attempt", attemptNotFound(id), scanAttempt, s.q.attemptByID, id)
}

// Attempts implements Store.
func (s *PostgresStore) Attempts(ctx context.Context, jobID string) ([]Attempt, error) {
	out, err := queryAll(ctx, s.db, s, "list attempts", scanAttempt, s.q.attempts, jobID)
	if err != nil || len(out) > 0 {
		return out, err
	}
	// No attempt: is there a job?
	_, err = queryOne(ctx, s.db, s, "list attempts", jobNotFound(jobID), scanValue[int], s.q.jobExists, jobID)
	return out, err
}

// CreateAttempt implements Store.
func (s *PostgresStore) CreateAttempt(ctx context.Context, na NewAttempt) (Attempt, error) {
	// The arguments point into r, which the destinations are in already.
	var r struct {
		jobID, id, provider string
		at                  pgtype.Timestamptz // pgx's own type, encoded without a wrapper
		seq                 int32
		got                 string
		known               pgKnown
		base                int64
		dest                [3]any
		args                [5]any
	}
	r.jobID, r.id, r.provider = na.JobID, na.ID, na.Provider
	r.at = pgtype.Timestamptz{Time: na.At, Valid: true}
	r.known = pgKnown{&r.got, na.Provider}
	d := append(r.dest[:0], &r.seq, &r.known, &r.base)
	args := append(r.args[:0], pgText{&r.jobID}, pgText{&r.id}, pgText{&r.provider}, na.Hedge, &r.at)
	for range maxRetries {
		err := s.interpret("start attempt", pgxQueryRow(ctx, s.db, s.q.createAttempt, args, d...))
		if err == nil {
			stored := na.At.UTC().Truncate(time.Microsecond) // as stored: pgx sends whole microseconds
			return Attempt{ID: na.ID, JobID: na.JobID, Seq: int(r.seq), Provider: r.got, State: AttemptStarting,
				BaseVersion: r.base, Hedge: na.Hedge, CreatedAt: stored, UpdatedAt: stored}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) && !errors.Is(err, errUniqueInDoubt) {
			return Attempt{}, err
		}
		if err := s.explain(ctx, func(r rowReader) error { return whyNoAttempt(ctx, r, na) }); err != nil {
			return Attempt{}, err
		}
	}
	return Attempt{}, errKeptChanging("start attempt")
}

// UpdateAttempt implements Store.
func (s *PostgresStore) UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error) {
	if err := u.Check(); err != nil {
		return Attempt{}, err
	}
	// As in CreateAttempt, the arguments point into r.
	var r struct {
		u       AttemptUpdate
		at      pgtype.Timestamptz
		a       Attempt
		seq     int32
		known   pgKnown
		created pgtype.Timestamptz
		dest    [8]any
		args    [10]any
	}
	r.u, r.at = u, pgtype.Timestamptz{Time: u.At, Valid: true}
	r.known = pgKnown{&r.a.ProviderRef, u.ProviderRef}
	d := append(r.dest[:0], &r.a.JobID, &r.seq, &r.a.Provider, &r.a.BaseVersion, &r.a.Hedge,
		&r.known, &r.a.Reason, &r.created)
	from1, from2, from3 := fromStates(u.From)
	args := append(r.args[:0], pgText{&r.u.ID}, stateArg(string(u.To)), pgText{&r.u.ProviderRef}, pgText{&r.u.Reason},
		&r.at, u.To.Terminal(), stateArg(from1), stateArg(from2), stateArg(from3), pgText{&r.u.ClaimToken})
	for range maxRetries {
		err := s.interpret("update attempt", pgxQueryRow(ctx, s.db, s.q.updateAttempt, args, d...))
		if err == nil {
			a := r.a
			a.ID, a.State, a.Seq, a.CreatedAt = u.ID, u.To, int(r.seq), pgTime(r.created)
			a.UpdatedAt = u.At.UTC().Truncate(time.Microsecond) // as stored: pgx sends whole microseconds
			if u.To.Terminal() {
				a.FinishedAt = a.UpdatedAt
			}
			return a, nil
		}
		inDoubt := errors.Is(err, errUniqueInDoubt)
		if !inDoubt && !errors.Is(err, sql.ErrNoRows) {
			return Attempt{}, err
		}
		var cur Attempt
		if err := s.explain(ctx, func(r rowReader) (err error) {
			cur, err = whyNotUpdated(ctx, r, u, inDoubt)
			return err
		}); err != nil {
			return cur, err
		}
	}
	return Attempt{}, errKeptChanging("update attempt")
}

// CompleteAttempt implements Store: the compare-and-swap of cas.go, in two
// statements sent at once (pgCompleteJob and pgCompleteFate, see
// pgCompletePipeline) or, where they cannot be, in one (pgCompleteAttempt).
func (s *PostgresStore) CompleteAttempt(ctx context.Context, c Completion) (Job, Attempt, error) {
	var r completedRow
	err := s.complete(ctx, c, &r)
	if err == nil && !r.found {
		err = sql.ErrNoRows
	}
	if errors.Is(err, sql.ErrNoRows) {
		var j Job
		var a Attempt
		err := s.explain(ctx, func(r rowReader) (err error) {
			j, a, err = whyNotCompleted(ctx, r, c)
			return err
		})
		return j, a, err
	}
	if err != nil {
		return Job{}, Attempt{}, s.interpret("complete attempt", err)
	}
	stored := c.At.UTC().Truncate(time.Microsecond) // as stored: both paths send whole microseconds
	r.a.UpdatedAt, r.a.FinishedAt = stored, stored
	return completed(r.j, r.a)
}

// complete runs Complete's statements on a connection of the pool and
// reads the job and the attempt after the step into r.
func (s *PostgresStore) complete(ctx context.Context, c Completion, r *completedRow) error {
	return pgxOn(ctx, s.db, func(pc *pgx.Conn) error {
		*r = completedRow{} // a try again after a closed connection starts afresh
		err := pgCompletePipeline(ctx, pc, s.q, c, r)
		if errors.Is(err, errNotPipelined) {
			err = r.scan(c, func(args, dest []any) error {
				return pc.QueryRow(ctx, s.q.completeAttempt, args...).Scan(dest...)
			})
		}
		return err
	}, func(conn *sql.Conn) error {
		return r.scan(c, func(args, dest []any) error {
			return conn.QueryRowContext(ctx, s.q.completeAttempt, args...).Scan(dest...)
		})
	})
}

// scan runs pgCompleteAttempt through query, which scans its row into
// dest, and reads the row into r.
func (r *completedRow) scan(c Completion, query func(args, dest []any) error) error {
	var row struct {
		j     pgJob
		state string
		seq   int32
		at    time.Time
		dest  [16 + 8]any
		args  [7]any
	}
	d := row.j.dest(row.dest[:0])
	d = append(d, &row.seq, &r.a.Provider, pgState{&row.state}, &r.a.BaseVersion, &r.a.Hedge, &r.a.ProviderRef, &r.a.Reason, &row.at)
	// The time as pgx's own type, which it encodes without wrapping it.
	at := pgtype.Timestamptz{Time: c.At, Valid: true}
	args := append(row.args[:0], c.AttemptID, string(c.Result), at, c.ClaimToken,
		reasonLostPrefix, reasonLostSuffix, reasonClosedPrefix)
	if err := query(args, d); err != nil {
		return err
	}
	r.j = row.j.job()
	r.a.ID, r.a.JobID, r.a.State, r.a.Seq = c.AttemptID, r.j.ID, AttemptState(row.state), int(row.seq)
	r.a.CreatedAt = row.at.UTC()
	r.found = true
	return nil
}

// The capabilities, in the order of store.go.

// CreateJobTx implements TxStore. It runs each statement once: PostgreSQL
// aborts the caller's transaction on a serialization failure or a
// deadlock, which are returned as a StorageError of kind StorageConflict.
func (s *PostgresStore) CreateJobTx(ctx context.Context, tx DBTX, j Job) (Job, bool, error) {
	got, created, err := s.createJob(ctx, pgHandle{db: tx}, j)
	return got, created, inCallerTx(err)
}

// PgxTxStore is implemented by stores that can create a job inside a
// transaction that the caller began with pgx (a pgx.Tx from a *pgx.Conn or
// a pgxpool.Pool), for Manager.SubmitPgxTx. PostgresStore implements it.
// It is optional: SubmitPgxTx on a store without it returns an error
// matching errors.ErrUnsupported.
type PgxTxStore interface {
	// CreateJobPgxTx is Store.CreateJobTx inside tx, a pgx transaction on
	// the store's database, with the same contract.
	CreateJobPgxTx(ctx context.Context, tx pgx.Tx, j Job) (job Job, created bool, err error)
}

// SubmitPgxTx is SubmitTx inside a transaction that the caller began with
// pgx (a pgx.Tx from a *pgx.Conn, or from a pgxpool.Pool), for
// applications that use pgx rather than database/sql. It behaves as
// SubmitTx: the job exists only if tx commits, and a conflict that tx
// cannot survive is a *StorageError of kind StorageConflict.
//
// The store must be a PostgresStore on the same database; to share one
// pool between the application and the store, open the store over
// stdlib.OpenDBFromPool(pool). Other stores return an error matching
// errors.ErrUnsupported, and a nil tx is ErrInvalidInput; neither writes
// anything. As in SubmitTx, a req.Reuse other than KeyReuseNever is
// ErrInvalidInput.
//
// SubmitTx cannot take a pgx.Tx: it has none of the methods of *sql.Tx
// that SubmitTx uses, and database/sql's rows cannot be made from pgx's.
func (m *Manager) SubmitPgxTx(ctx context.Context, tx pgx.Tx, req SubmitRequest) (Job, bool, error) {
	s, ok := m.store.(PgxTxStore)
	if !ok {
		return Job{}, false, fmt.Errorf("jobs: SubmitPgxTx on a %T, which cannot write in a pgx transaction: %w", m.store, errors.ErrUnsupported)
	}
	if tx == nil {
		return Job{}, false, invalid("tx", "nil")
	}
	if err := reuseInTx(req); err != nil {
		return Job{}, false, err
	}
	return m.submit(ctx, req, func(ctx context.Context, j Job) (Job, bool, error) {
		return s.CreateJobPgxTx(ctx, tx, j)
	})
}

// CreateJobPgxTx implements PgxTxStore: CreateJobTx in a pgx transaction,
// with the same statements.
func (s *PostgresStore) CreateJobPgxTx(ctx context.Context, tx pgx.Tx, j Job) (Job, bool, error) {
	got, created, err := s.createJob(ctx, pgHandle{tx: tx}, j)
	return got, created, inCallerTx(err)
}

// StaleAttempts implements ClaimStore.
func (s *PostgresStore) StaleAttempts(ctx context.Context, q StaleQuery) ([]Attempt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	upper := q.UnknownBefore
	if q.OpenBefore.After(upper) {
		upper = q.OpenBefore
	}
	unclaimed := q.UnclaimedAt
	if unclaimed.IsZero() {
		unclaimed = endOfTime
	}
	return queryAll(ctx, s.db, s, "list stale attempts", scanAttempt, s.q.staleAttempts,
		q.UnknownBefore, q.OpenBefore, upper, limit, unclaimed)
}

// ClaimAttempt implements ClaimStore.
func (s *PostgresStore) ClaimAttempt(ctx context.Context, c AttemptClaim) (Attempt, bool, error) {
	if err := c.Check(); err != nil {
		return Attempt{}, false, err
	}
	if !c.State.Open() { // only an attempt in doubt is reconciled
		return Attempt{}, false, nil
	}
	a, err := scanAttempt(s.db.QueryRowContext(ctx, s.q.claimAttempt, c.ID, string(c.State), c.UpdatedAt, c.Token, c.At, c.Until))
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, false, nil
	}
	if err != nil {
		return Attempt{}, false, s.interpret("claim attempt", err)
	}
	return a, true, nil
}

// RenewClaim implements ClaimStore.
func (s *PostgresStore) RenewClaim(ctx context.Context, c AttemptClaim) (bool, error) {
	if err := c.Check(); err != nil {
		return false, err
	}
	n, err := rowsAffected(ctx, s.db, s.q.renewClaim, c.ID, c.Token, c.Until)
	if err != nil {
		return false, s.interpret("renew claim", err)
	}
	return n == 1, nil
}

// RecordVerification implements VerificationStore.
func (s *PostgresStore) RecordVerification(ctx context.Context, v Verification) error {
	var expires any
	if !v.ExpiresAt.IsZero() {
		expires = v.ExpiresAt
	}
	_, err := s.db.ExecContext(ctx, s.q.recordVerification,
		v.ID, v.Provider, v.Kind, v.ContractVersion, v.Passed, v.Reason, v.VerifiedAt, expires)
	return s.interpret("record verification", err)
}

// Verifications implements VerificationStore.
func (s *PostgresStore) Verifications(ctx context.Context, f VerificationFilter) ([]Verification, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.db, s, "list verifications", scanVerification, s.q.verifications, f.Provider, f.Kind, f.ContractVersion, limit)
}

// PurgeJobs implements PurgeStore: one statement per batch, which never waits
// for a row lock (pgPurge).
func (s *PostgresStore) PurgeJobs(ctx context.Context, q PurgeQuery) (PurgeCount, error) {
	var n PurgeCount
	var err error
	switch {
	case q.DryRun:
		err = s.db.QueryRowContext(ctx, s.q.countPurgeable, q.Before).Scan(&n.Jobs, &n.Attempts)
	case q.Limit > 0:
		err = s.db.QueryRowContext(ctx, s.q.purge, q.Before, q.Limit).Scan(&n.Jobs, &n.Attempts)
	}
	if err != nil {
		return PurgeCount{}, s.interpret("purge", err)
	}
	return n, nil
}

// The reads that explain a refused write (see rowReader).

// explain runs why on the rows as one snapshot holds them: a read-only
// REPEATABLE READ transaction, begun after the refused statement ended, so
// that it sees at least what that statement saw.
func (s *PostgresStore) explain(ctx context.Context, why func(rowReader) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return s.interpret("read", err)
	}
	defer tx.Rollback()
	return why(pgRows{s, tx})
}

// pgRows reads rows through q, a transaction of explain's.
type pgRows struct {
	s *PostgresStore
	q DBTX
}

func (r pgRows) jobForWrite(ctx context.Context, id string) (Job, error) {
	return queryOne(ctx, r.q, r.s, "get job", jobNotFound(id), scanJob, r.s.q.jobByID, id)
}

func (r pgRows) attemptForWrite(ctx context.Context, id string) (Attempt, error) {
	return queryOne(ctx, r.q, r.s, "get attempt", attemptNotFound(id), scanAttempt, r.s.q.attemptByID, id)
}

func (r pgRows) blocker(ctx context.Context, jobID string) (*AttemptInFlightError, error) {
	return queryOne(ctx, r.q, r.s, "find blocking attempt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, jobID)
	}, r.s.q.blocker, jobID)
}

func (r pgRows) otherInDoubt(ctx context.Context, a Attempt) (*AttemptInFlightError, error) {
	return queryOne(ctx, r.q, r.s, "find attempt in doubt", nil, func(sc scanner) (*AttemptInFlightError, error) {
		return scanBlocker(sc, a.JobID)
	}, r.s.q.otherInDoubt, a.JobID, a.ID)
}

func (r pgRows) claimToken(ctx context.Context, attemptID string) (string, error) {
	return queryOne(ctx, r.q, r.s, "check claim", attemptNotFound(attemptID), scanValue[string], r.s.q.claimToken, attemptID)
}
