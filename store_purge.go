package jobs

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// Purge queries. A job is purgeable when it is terminal (closed_at is set
// exactly then), closed before $1, and has no open attempt. The candidates
// are read through jobs_closed_at_idx, oldest first.
const (
	purgeableWhere = `closed_at IS NOT NULL AND closed_at < $1
      AND NOT EXISTS (SELECT 1 FROM job_attempts a
                      WHERE a.job_id = jobs.id AND a.state IN ('starting', 'running', 'unknown'))`

	qPurgeCandidates = `SELECT id FROM jobs WHERE ` + purgeableWhere + ` ORDER BY closed_at LIMIT $2`

	qCountPurgeable = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM jobs WHERE ` + purgeableWhere

	// On PostgreSQL one statement deletes a batch, and never waits for a
	// lock: victims takes the jobs' row locks with SKIP LOCKED, att the
	// attempts' the same way, and only jobs whose every attempt could be
	// locked (ok) are deleted. Complete locks an attempt and then its job, the
	// opposite order; waiting for an attempt here would deadlock with a
	// retried Complete. A terminal job accepts no new attempt, and a terminal
	// attempt never reopens, so what victims saw stays true. The attempts are
	// deleted explicitly rather than by the foreign key's cascade, so that
	// they can be counted and so that both dialects do the same.
	qPurgePostgres = `WITH victims AS (
    SELECT id, attempt_count FROM jobs WHERE ` + purgeableWhere + `
     ORDER BY closed_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), att AS (
    SELECT id, job_id FROM job_attempts WHERE job_id IN (SELECT id FROM victims)
       FOR UPDATE SKIP LOCKED
), ok AS (
    SELECT v.id FROM victims v
     WHERE v.attempt_count = (SELECT COUNT(*) FROM att WHERE att.job_id = v.id)
), da AS (
    DELETE FROM job_attempts WHERE id IN (SELECT att.id FROM att JOIN ok ON ok.id = att.job_id) RETURNING 1
), dj AS (
    DELETE FROM jobs WHERE id IN (SELECT id FROM ok) RETURNING 1
)
SELECT (SELECT COUNT(*) FROM dj), (SELECT COUNT(*) FROM da)`
)

// PurgeJobs implements PurgeStore.
func (s *SQLStore) PurgeJobs(ctx context.Context, q PurgeQuery) (PurgeCount, error) {
	if q.DryRun {
		return s.countPurgeable(ctx, q.Before)
	}
	before, limit := q.Before, q.Limit
	var n PurgeCount
	if limit <= 0 {
		return n, nil
	}
	cutoff := s.d.ts(before)
	if s.d.ctes {
		err := s.withRetry(ctx, func() error {
			return s.db.QueryRowContext(ctx, qPurgePostgres, cutoff, limit).Scan(&n.Jobs, &n.Attempts)
		})
		if err != nil {
			return PurgeCount{}, s.d.interpret("purge", err)
		}
		return n, nil
	}
	// SQLite: one immediate transaction, so writers are serialised with it;
	// it is short because the batch is bounded.
	err := s.inTx(ctx, "purge", func(conn *sql.Conn) error {
		n = PurgeCount{}
		rows, err := conn.QueryContext(ctx, s.d.rebind(qPurgeCandidates), cutoff, limit)
		if err != nil {
			return s.d.interpret("purge", err)
		}
		var ids []any
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return s.d.interpret("purge", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.d.interpret("purge", err)
		}
		if len(ids) == 0 {
			return nil
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
		res, err := conn.ExecContext(ctx, `DELETE FROM job_attempts WHERE job_id IN `+in, ids...)
		if err != nil {
			return s.d.interpret("purge", err)
		}
		if n.Attempts, err = res.RowsAffected(); err != nil {
			return s.d.interpret("purge", err)
		}
		res, err = conn.ExecContext(ctx, `DELETE FROM jobs WHERE id IN `+in, ids...)
		if err != nil {
			return s.d.interpret("purge", err)
		}
		if n.Jobs, err = res.RowsAffected(); err != nil {
			return s.d.interpret("purge", err)
		}
		return nil
	})
	if err != nil {
		return PurgeCount{}, err
	}
	return n, nil
}

// countPurgeable counts what PurgeJobs would delete.
func (s *SQLStore) countPurgeable(ctx context.Context, before time.Time) (PurgeCount, error) {
	var n PurgeCount
	err := s.rdb.QueryRowContext(ctx, s.d.rebind(qCountPurgeable), s.d.ts(before)).Scan(&n.Jobs, &n.Attempts)
	if err != nil {
		return PurgeCount{}, s.d.interpret("count purgeable", err)
	}
	return n, nil
}
