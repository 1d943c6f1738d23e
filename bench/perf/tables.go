package perf

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// StoredOwners is how many owners the stored jobs of a SubmitStored
// workload, and its measured requests, are spread over.
const StoredOwners = 1000

// StoredOwner returns the name of the i-th owner of stored jobs.
func StoredOwner(i int) string { return "tenant-" + strconv.Itoa(i) }

// schema is how a contender lays out its jobs and attempts, as far as the
// workloads prefill and check them. Both layouts share the names the checks
// read: jobs (id, owner, idempotency_key, kind, provider, params, state,
// version, result, completed_by) and an attempts table (id, job_id, provider,
// state, base_version, provider_ref).
type schema struct {
	jobs     string // the name of the jobs table
	attempts string // the name of the attempts table
	// Further columns of a prefilled job or attempt, each list starting with
	// a comma, and their values in SQL.
	jobCols, jobVals         string
	attemptCols, attemptVals string
	// raceJobState is the state of a job whose attempts are running.
	raceJobState string
	// afterRaces, if set, runs after the attempts of FillRaces are
	// inserted, with the owner as $1.
	afterRaces string
}

// Tables are a contender's jobs and attempts as the workloads prepare and
// check them: prefilled with set-based SQL (generate_series on PostgreSQL, a
// recursive common table expression on SQLite), so that a million jobs are
// one statement rather than a million round trips, and read back to check
// what a workload wrote. Nothing of it is timed.
type Tables struct {
	dialect string
	w, r    *sql.DB // writes (on SQLite the contender's writer), reads
	s       schema
}

func newTables(dialect string, w, r *sql.DB, s schema) *Tables {
	return &Tables{dialect: dialect, w: w, r: r, s: s}
}

// q is query in the dialect's placeholders, {jobs} standing for the jobs
// table's name.
func (t *Tables) q(query string) string {
	return rebind(t.dialect, strings.ReplaceAll(query, "{jobs}", t.s.jobs))
}

const fillJobsPostgres = `INSERT INTO {jobs} (id, owner, idempotency_key, kind, provider, params, state{jobCols})
SELECT $1::text || lpad(g::text, 16, '0'), CASE WHEN $4::int = 1 THEN $2::text ELSE $2::text || (g % $4::int) END,
       md5(random()::text), 'charge', 'psp', ({params})::json, $5::text{jobVals}
  FROM generate_series(1, $3::int) AS g`

const fillJobsSQLite = `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $3)
INSERT INTO {jobs} (id, owner, idempotency_key, kind, provider, params, state{jobCols})
SELECT $1 || printf('%016d', i), CASE WHEN $4 = 1 THEN $2 ELSE $2 || (i % $4) END, lower(hex(randomblob(16))),
       'charge', 'psp', {params}, $5{jobVals}
  FROM g`

const fillAttempts = `INSERT INTO {attempts} (id, job_id, provider, state, base_version, provider_ref{attemptCols})
SELECT 'att' || substr(id, 4) || CAST($2 AS text), id, provider, 'running', version, 'ref-' || CAST($2 AS text){attemptVals}
  FROM {jobs} WHERE owner = $1`

// fill inserts n jobs in state with random keys and parameters of the size
// and shape of ParamsFor: for owner when owners is 1, else for owner
// followed by 0 … owners-1. Their IDs sort before any the contender makes
// itself.
func (t *Tables) fill(ctx context.Context, owner string, owners, n int, state string) error {
	if t.dialect == MySQL {
		return t.fillMySQL(ctx, owner, owners, n, state)
	}
	query := fillJobsPostgres
	if t.dialect == SQLite {
		query = fillJobsSQLite
	}
	query = strings.NewReplacer("{jobCols}", t.s.jobCols, "{jobVals}", t.s.jobVals,
		"{params}", paramsTemplate.sql(t.dialect)).Replace(query)
	prefix := "job_00" + randomHex(4)
	if _, err := t.w.ExecContext(ctx, t.q(query), prefix, owner, n, owners, state); err != nil {
		return fmt.Errorf("fill %d jobs: %w", n, err)
	}
	return nil
}

// FillPending inserts n pending jobs for owner and returns their IDs.
func (t *Tables) FillPending(ctx context.Context, owner string, n int) ([]string, error) {
	if err := t.fill(ctx, owner, 1, n, "pending"); err != nil {
		return nil, err
	}
	return t.JobIDs(ctx, owner)
}

// FillRaces inserts n jobs for owner, each with two running attempts (a
// hedge) started at the job's version, ready for two Completes to race.
// It returns the attempts' IDs in pairs.
func (t *Tables) FillRaces(ctx context.Context, owner string, n int) ([][2]string, error) {
	if t.dialect == MySQL {
		return t.fillRacesMySQL(ctx, owner, n)
	}
	if err := t.fill(ctx, owner, 1, n, t.s.raceJobState); err != nil {
		return nil, err
	}
	query := strings.NewReplacer("{attempts}", t.s.attempts,
		"{attemptCols}", t.s.attemptCols, "{attemptVals}", t.s.attemptVals).Replace(fillAttempts)
	tx, err := t.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	for _, side := range []string{"a", "b"} {
		if _, err := tx.ExecContext(ctx, t.q(query), owner, side); err != nil {
			return nil, fmt.Errorf("fill attempts: %w", err)
		}
	}
	if t.s.afterRaces != "" {
		if _, err := tx.ExecContext(ctx, t.q(t.s.afterRaces), owner); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	ids, err := t.JobIDs(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([][2]string, len(ids))
	for i, id := range ids {
		out[i] = [2]string{"att" + id[3:] + "a", "att" + id[3:] + "b"}
	}
	return out, nil
}

// FillTo brings the tables to at least n jobs, spread over StoredOwners
// owners, then settles them as a database in service would be: statistics
// and visibility map up to date on PostgreSQL, the write-ahead log
// checkpointed on SQLite.
func (t *Tables) FillTo(ctx context.Context, n int) error {
	have, err := t.Count(ctx)
	if err != nil {
		return err
	}
	if have < n {
		if t.dialect == SQLite {
			// Random keys into a large unique index: give the writer's
			// page cache room while filling, then restore the size the
			// contender runs with.
			var size int
			if err := t.w.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&size); err != nil {
				return err
			}
			if _, err := t.w.ExecContext(ctx, `PRAGMA cache_size = -262144`); err != nil {
				return err
			}
			defer t.w.ExecContext(context.WithoutCancel(ctx), `PRAGMA cache_size = `+strconv.Itoa(size))
		}
		if err := t.fill(ctx, "tenant-", StoredOwners, n-have, "pending"); err != nil {
			return err
		}
	}
	switch t.dialect {
	case Postgres:
		_, err = t.w.ExecContext(ctx, t.q(`VACUUM ANALYZE {jobs}`))
	case MySQL:
		_, err = t.w.ExecContext(ctx, t.q(`ANALYZE TABLE {jobs}`))
	default:
		_, err = t.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	return err
}

// JobIDs returns the IDs of owner's jobs in ID order.
func (t *Tables) JobIDs(ctx context.Context, owner string) ([]string, error) {
	return queryRows(ctx, t.r, t.q(`SELECT id FROM {jobs} WHERE owner = $1 ORDER BY id`), func(rows *sql.Rows) (id string, err error) {
		return id, rows.Scan(&id)
	}, owner)
}

// Count returns how many jobs the tables hold.
func (t *Tables) Count(ctx context.Context) (int, error) {
	var n int
	err := t.r.QueryRowContext(ctx, t.q(`SELECT count(*) FROM {jobs}`)).Scan(&n)
	return n, err
}

// Warm reads every full (not partial) index of the jobs table from end to
// end, on SQLite, so that the operating system's cache holds the pages a
// Submit reads before a SubmitStored trial measures it. The files of a
// contender sit idle while the others run, and a machine may reclaim a
// file's cached pages that nobody touched for a while (this VM's DAMON
// scheme pages them out after a minute): a trial would then measure reads
// from the disk, more of them the larger the table, whatever the
// contender. Every contender is warmed the same way before every such
// trial. PostgreSQL keeps what Submit reads in its shared buffers, which
// nothing reclaims: nothing is done there. It returns the indexes it read.
func (t *Tables) Warm(ctx context.Context) (indexes []string, err error) {
	if t.dialect != SQLite {
		return nil, nil
	}
	rows, err := t.r.QueryContext(ctx, `SELECT il.name, ii.name FROM pragma_index_list(?1) il, pragma_index_info(il.name) ii
 WHERE NOT il.partial AND ii.seqno = 0`, t.s.jobs)
	if err != nil {
		return nil, fmt.Errorf("warm: %w", err)
	}
	var scans []string
	for rows.Next() {
		var index, first string
		if err := rows.Scan(&index, &first); err != nil {
			rows.Close()
			return nil, fmt.Errorf("warm: %w", err)
		}
		// Every entry: the first column of these indexes is never NULL.
		indexes = append(indexes, index)
		scans = append(scans, fmt.Sprintf(`SELECT count(*) FROM %s INDEXED BY %q WHERE %q IS NOT NULL`, t.s.jobs, index, first))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("warm: %w", err)
	}
	if len(scans) == 0 {
		return nil, fmt.Errorf("warm: the jobs table has no index")
	}
	for _, q := range scans {
		var n int
		if err := t.r.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("warm: %s: %w", q, err)
		}
	}
	return indexes, nil
}

// CountJobs returns how many jobs owner has.
func (t *Tables) CountJobs(ctx context.Context, owner string) (int, error) {
	var n int
	err := t.r.QueryRowContext(ctx, t.q(`SELECT count(*) FROM {jobs} WHERE owner = $1`), owner).Scan(&n)
	return n, err
}

// Outcome is what became of one job.
type Outcome struct {
	JobID       string
	State       string
	Version     int64
	CompletedBy string // empty: no winner
	Result      string // empty: none stored
}

// Outcomes returns owner's jobs as they are stored, in ID order.
func (t *Tables) Outcomes(ctx context.Context, owner string) ([]Outcome, error) {
	return queryRows(ctx, t.r, t.q(`SELECT id, state, version, COALESCE(completed_by, ''), COALESCE(CAST(result AS text), '')
  FROM {jobs} WHERE owner = $1 ORDER BY id`), func(rows *sql.Rows) (o Outcome, err error) {
		return o, rows.Scan(&o.JobID, &o.State, &o.Version, &o.CompletedBy, &o.Result)
	}, owner)
}

// AttemptStates counts the attempts of owner's jobs by state.
func (t *Tables) AttemptStates(ctx context.Context, owner string) (map[string]int, error) {
	type count struct {
		state string
		n     int
	}
	counts, err := queryRows(ctx, t.r, t.q(`SELECT a.state, count(*) FROM `+t.s.attempts+` a
  JOIN {jobs} j ON j.id = a.job_id WHERE j.owner = $1 GROUP BY a.state`), func(rows *sql.Rows) (c count, err error) {
		return c, rows.Scan(&c.state, &c.n)
	}, owner)
	out := map[string]int{}
	for _, c := range counts {
		out[c.state] = c.n
	}
	return out, err
}

// queryRows runs query on db and scans every row with scan.
func queryRows[T any](ctx context.Context, db *sql.DB, query string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Version describes the database server or library.
func (t *Tables) Version(ctx context.Context) string { return version(ctx, t.dialect, t.r) }
