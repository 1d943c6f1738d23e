package jobs

import (
	"regexp"
	"strings"
)

// The statements of PostgresStore, in the order of the methods that run
// them (store_postgres.go). Each is a constant that names the library's
// tables as they are, to be found through the connection's search_path; a
// store opened with Schema runs them with every table qualified by its
// schema (pgStatements), made once when the store opens.

// pgJobColsOfJobs is jobCols qualified by the table, for statements that
// join jobs with another table.
const pgJobColsOfJobs = `intentjobs_jobs.id, intentjobs_jobs.owner, intentjobs_jobs.idempotency_key, intentjobs_jobs.kind, intentjobs_jobs.provider, intentjobs_jobs.params,
    intentjobs_jobs.fingerprint, intentjobs_jobs.state, intentjobs_jobs.version, intentjobs_jobs.attempt_count, intentjobs_jobs.result, intentjobs_jobs.completed_by, intentjobs_jobs.reason,
    intentjobs_jobs.created_at, intentjobs_jobs.updated_at, intentjobs_jobs.closed_at`

// CreateJob, CreateJobTx and CreateJobPgxTx.
const (
	// Submit in one round trip: insert, or return the existing row. A
	// duplicate inserted by a transaction that committed after this
	// statement began is invisible to its snapshot; then no row comes back,
	// and createJob reads it with a new statement.
	//
	// A new job is the row as sent: its columns come back as constants
	// that cost nothing to scan, and only created (true) tells.
	pgCreateJob = `WITH ins AS (
    INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING 1
)
SELECT '', '', '', '', '', NULL::json, '', '', 0::bigint, 0, NULL::json, NULL::text, '',
       NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, true FROM ins
UNION ALL
SELECT ` + jobCols + `, false FROM intentjobs_jobs
 WHERE owner = $2 AND idempotency_key = $3 AND NOT EXISTS (SELECT 1 FROM ins)`

	// Submit of a key that is probably new (keyStreak): the insert alone,
	// cheaper than pgCreateJob's common table expression. No row: the key
	// is taken, and pgCreateJob follows.
	pgInsertJob = `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING
    RETURNING true`
)

// ReplaceJob retires the old job's key and creates the new job in one
// step. The unique constraint on (owner, idempotency_key) still binds every
// key: a retired job holds RetiredKey(key, new job's ID) in that column,
// longer than any key a client can submit and unique per replacement,
// which scanJob reads back into Job.Key and Job.ReplacedBy.
const (
	// pgReplaceJob retires the old job's key and inserts the new job, in
	// one statement: both or neither. The key is retired only if no
	// attempt of the old job may still act (blocker: starting, running or
	// unknown) or has acted with its result dropped. A terminal job gets no
	// new attempt and its attempts only move on to terminal states, so the
	// statement's snapshot, taken after the caller found the job terminal,
	// holds every attempt that could block it. The UPDATE locks the old
	// row; a concurrent replacement waits for it, then finds the key moved
	// and retires nothing. The INSERT's unique check does not see the old
	// row's key, which this statement itself has moved; a concurrent Submit
	// of the key waits for this statement's transaction and then finds the
	// new job. It returns the new job with two empty columns, or the old
	// job with the attempt that blocked it (when the job still held the
	// key in one of the states), or no row if nothing was retired for
	// another reason.
	pgReplaceJob = `WITH blocker AS (
    SELECT id, state FROM intentjobs_attempts
     WHERE job_id = $10 AND state IN ('starting', 'unknown', 'running')
     ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1
), retired AS (
    UPDATE intentjobs_jobs SET idempotency_key = $9
     WHERE id = $10 AND owner = $2 AND idempotency_key = $3 AND state IN ($11, $12, $13)
       AND NOT EXISTS (SELECT 1 FROM blocker)
       AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                        WHERE a.job_id = $10 AND a.state = 'cancelled'
                          AND a.reason IN ('` + ReasonDroppedJobCancelled + `', '` + ReasonDroppedJobFailed + `'))
    RETURNING id
), created AS (
    INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', 1, $8, $8 WHERE EXISTS (SELECT 1 FROM retired)
    RETURNING ` + jobCols + `
)
SELECT *, '', '' FROM created
UNION ALL
SELECT ` + pgJobColsOfJobs + `, blocker.id, blocker.state FROM intentjobs_jobs, blocker
 WHERE intentjobs_jobs.id = $10 AND intentjobs_jobs.owner = $2 AND intentjobs_jobs.idempotency_key = $3 AND intentjobs_jobs.state IN ($11, $12, $13)`
)

// Job and JobByKey.
const (
	pgJobByID = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE id = $1`

	pgJobByKey = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE owner = $1 AND idempotency_key = $2`
)

// CloseJob.
const (
	// CloseJob fails or cancels an open job. With $5 (fail) it also
	// requires that no attempt is open; comparing attempt_count with the
	// statement's snapshot makes a concurrent StartAttempt (which increments
	// it under the row lock) turn this into a no-op instead of a stale
	// success: PostgreSQL re-evaluates the WHERE on the row it locks.
	pgCloseJob = `UPDATE intentjobs_jobs SET
        state      = $2,
        version    = version + 1,
        reason     = $3,
        updated_at = $4,
        closed_at  = $4
    WHERE id = $1 AND state IN ('pending', 'running')
      AND (NOT $5 OR (
            attempt_count = (SELECT s.attempt_count FROM intentjobs_jobs s WHERE s.id = $1)
            AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                            WHERE a.job_id = $1 AND a.state IN ('starting', 'running', 'unknown'))))
    RETURNING ` + jobCols
)

// Attempt and Attempts.
const (
	pgAttemptByID = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE id = $1`

	pgAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE job_id = $1 ORDER BY seq`

	pgJobExists = `SELECT 1 FROM intentjobs_jobs WHERE id = $1`
)

// CreateAttempt and UpdateAttempt.
const (
	// StartAttempt in one statement. The UPDATE of the job is the guard:
	// the job must be open, no attempt may be in doubt (nor running, unless
	// $4 allows a hedge), and attempt_count must still be what the
	// statement's snapshot saw. It takes the job's row lock; if a concurrent
	// StartAttempt or FailJob changed the row first, PostgreSQL re-evaluates
	// the WHERE on the new row, where the count no longer matches, and the
	// statement does nothing (the caller looks again). The attempt is
	// inserted with the job's version and the new count as its Seq. The
	// unique index on attempts in doubt backs the guard up. It returns
	// only the columns the caller does not know.
	pgCreateAttempt = `WITH j AS (
    UPDATE intentjobs_jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = $5
     WHERE id = $1
       AND state IN ('pending', 'running')
       AND attempt_count = (SELECT s.attempt_count FROM intentjobs_jobs s WHERE s.id = $1)
       AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                        WHERE a.job_id = $1
                          AND (a.state IN ('starting', 'unknown') OR (a.state = 'running' AND NOT $4)))
    RETURNING id, version, attempt_count, provider
)
INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
SELECT $2, j.id, j.attempt_count, COALESCE(NULLIF($3, ''), j.provider), 'starting', j.version, $4, $5, $5 FROM j
RETURNING seq, provider, base_version`

	// UpdateAttempt: a move from one of $7, $8, $9. A provider reference
	// ($3) is recorded only on an attempt that has none: once recorded, it
	// never changes. A reconciler's write ($10) applies only under its
	// claim. Moving to unknown beside another attempt in doubt violates
	// the unique index intentjobs_attempts_one_in_doubt. It returns the columns
	// the caller does not know: not the ID, the state, nor the times it
	// sets (finished_at is set exactly in a terminal state).
	pgUpdateAttempt = `UPDATE intentjobs_attempts SET
        state        = $2,
        provider_ref = CASE WHEN $3 = '' THEN provider_ref ELSE $3 END,
        reason       = CASE WHEN $4 = '' THEN reason ELSE $4 END,
        updated_at   = $5,
        finished_at  = CASE WHEN $6 THEN $5 ELSE finished_at END
    WHERE id = $1 AND state IN ($7, $8, $9) AND ($3 = '' OR provider_ref = '')
      AND ($10 = '' OR claim_token = $10)
    RETURNING job_id, seq, provider, base_version, hedge, provider_ref, reason, created_at`
)

// CompleteAttempt: the compare-and-swap of cas.go.
//
// pgCompleteJob and pgCompleteFate are Complete in two statements sent
// together, in one implicit transaction (see PostgresStore.CompleteAttempt).
// pgCompleteJob is the compare-and-swap: its sub-select reads the attempt
// ($1) and locks it (FOR NO KEY UPDATE, which waits for a concurrent
// Cancel and then reads the attempt as that left it); the job changes only
// if the attempt is open (and, for a reconciler's write, claimed with $4)
// and the job is still at the attempt's BaseVersion, has no winner and is
// running. pgCompleteFate then records the attempt's fate from the job as
// its own snapshot, taken after the swap, shows it: the job this
// transaction completed, or the job as the winner or the close that
// refused the swap committed it (the swap waited for that transaction's
// row lock). $1 is the attempt, $2 the time, $3 the claim token, $4-$6 the
// pieces of the reasons of cas.go. It returns the job (pgJobColsOfJobs) and
// the attempt (the columns of pgCompletedAttemptCols), or no row if the
// attempt does not exist, is no longer open, or is claimed with another
// token.
const (
	pgCompleteJob = `UPDATE intentjobs_jobs SET state = 'succeeded', result = $2, completed_by = $1, version = version + 1,
                updated_at = $3, closed_at = $3
 WHERE (id, version) = (SELECT job_id, base_version FROM intentjobs_attempts
                         WHERE id = $1 AND state = ANY ('{starting,running,unknown}'::text[])
                           AND ($4 = '' OR claim_token = $4)
                         FOR NO KEY UPDATE)
   AND completed_by IS NULL AND state = 'running'`

	pgCompleteFate = `UPDATE intentjobs_attempts a SET
        state = CASE WHEN intentjobs_jobs.completed_by = $1 THEN 'succeeded'
                     WHEN intentjobs_jobs.completed_by IS NOT NULL THEN 'lost'
                     ELSE 'cancelled' END,
        reason = CASE WHEN intentjobs_jobs.completed_by = $1 THEN a.reason
                      WHEN intentjobs_jobs.completed_by IS NOT NULL THEN $4 || intentjobs_jobs.completed_by || $5
                      ELSE $6 || intentjobs_jobs.state END,
        updated_at = $2,
        finished_at = $2
  FROM intentjobs_jobs
 WHERE a.id = $1 AND intentjobs_jobs.id = a.job_id AND a.state = ANY ('{starting,running,unknown}'::text[])
   AND ($3 = '' OR a.claim_token = $3)
RETURNING ` + pgJobColsOfJobs + `, a.seq, a.provider, a.state, a.base_version, a.hedge, a.provider_ref, a.reason, a.created_at`
)

// pgCompleteAttempt is Complete in one statement, for connections on which
// pgCompleteJob and pgCompleteFate cannot be sent together. a locks the
// attempt and reads its latest committed version; won is the
// compare-and-swap; j, read only when won changed nothing (a CTE that no
// one reads is not run), locks the job and reads its latest committed
// version; att records the attempt's fate. The result ($2) appears only in
// won: a loser's result is stored nowhere. $4 is a reconciler's claim
// token or an empty string; $5, $6 and $7 are the pieces of the reasons of
// cas.go. It returns the job and the attempt after the step
// (pgCompletedAttemptCols), or no row if the attempt does not exist, is no
// longer open, or is claimed with another token.
const pgCompleteAttempt = `WITH a AS (
    SELECT id, job_id, base_version, state, claim_token FROM intentjobs_attempts WHERE id = $1 FOR UPDATE
), j AS (
    SELECT ` + pgJobColsOfJobs + ` FROM intentjobs_jobs JOIN a ON intentjobs_jobs.id = a.job_id FOR UPDATE OF intentjobs_jobs
), won AS (
    UPDATE intentjobs_jobs SET state = 'succeeded', result = $2, completed_by = $1, version = intentjobs_jobs.version + 1,
                    updated_at = $3, closed_at = $3
      FROM a
     WHERE intentjobs_jobs.id = a.job_id
       AND a.state IN ('starting', 'running', 'unknown')
       AND ($4 = '' OR a.claim_token = $4)
       AND intentjobs_jobs.version = a.base_version
       AND intentjobs_jobs.completed_by IS NULL
       AND intentjobs_jobs.state = 'running'
    RETURNING ` + pgJobColsOfJobs + `
), att AS (
    UPDATE intentjobs_attempts SET
        state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded'
                     WHEN (SELECT completed_by FROM j) IS NOT NULL THEN 'lost'
                     ELSE 'cancelled' END,
        reason = CASE WHEN EXISTS (SELECT 1 FROM won) THEN reason
                      WHEN (SELECT completed_by FROM j) IS NOT NULL THEN $5 || (SELECT completed_by FROM j) || $6
                      ELSE $7 || (SELECT state FROM j) END,
        updated_at = $3,
        finished_at = $3
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
       AND ($4 = '' OR claim_token = $4)
    RETURNING ` + pgCompletedAttemptCols + `
)
SELECT won.*, att.* FROM won, att
UNION ALL
SELECT j.*, att.* FROM j, att WHERE NOT EXISTS (SELECT 1 FROM won)`

// pgCompletedAttemptCols are the columns of the attempt that
// pgCompleteAttempt returns: the others are known (its ID, its job's, and
// the time of the step, both updated_at and finished_at).
const pgCompletedAttemptCols = `seq, provider, state, base_version, hedge, provider_ref, reason, created_at`

// StaleAttempts, ClaimAttempt and RenewClaim.
const (
	// Stale attempts, served by intentjobs_attempts_stale_idx (updated_at,
	// claimed_until; partial on open states).
	pgStaleAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts
    WHERE state IN ('starting', 'running', 'unknown')
      AND updated_at < $3
      AND ((state = 'unknown' AND updated_at < $1) OR (state <> 'unknown' AND updated_at < $2))
      AND (claimed_until IS NULL OR claimed_until <= $5)
    ORDER BY updated_at, id
    LIMIT $4`

	// A claim is taken on an attempt still as the reconciler read it, and
	// not claimed by anyone else. PostgreSQL re-evaluates the WHERE on a
	// row that a concurrent claim changed first, so that of racing claims
	// exactly one changes the row.
	pgClaimAttempt = `UPDATE intentjobs_attempts SET claim_token = $4, claimed_until = $6
    WHERE id = $1 AND state = $2 AND updated_at = $3
      AND (claimed_until IS NULL OR claimed_until <= $5)
    RETURNING ` + attemptCols

	pgRenewClaim = `UPDATE intentjobs_attempts SET claimed_until = $3 WHERE id = $1 AND claim_token = $2`
)

// RecordVerification and Verifications.
const (
	pgRecordVerification = `INSERT INTO intentjobs_verifications (` + verificationCols + `)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	// Served by intentjobs_verifications_lookup_idx when provider, kind and
	// contract version are given, as CheckFailover gives them.
	pgVerifications = `SELECT ` + verificationCols + ` FROM intentjobs_verifications
    WHERE ($1 = '' OR provider = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR contract_version = $3)
    ORDER BY verified_at DESC, id DESC LIMIT $4`
)

// PurgeJobs.
const (
	// A job is purgeable when it is terminal (closed_at is set exactly
	// then), closed before $1, and has no open attempt. Candidates are
	// read through intentjobs_jobs_created_at_idx, oldest first: a job
	// closed before $1 was created before it, and an index on closed_at,
	// which every close sets, would keep closes from being HOT updates (see
	// migrations/postgres/0001_init.sql).
	pgPurgeable = `created_at < $1 AND closed_at < $1
      AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                      WHERE a.job_id = intentjobs_jobs.id AND a.state IN ('starting', 'running', 'unknown'))`

	pgCountPurgeable = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM intentjobs_jobs WHERE ` + pgPurgeable

	// One statement deletes a batch, and never waits for a lock: victims
	// takes the jobs' row locks with SKIP LOCKED, att the attempts' the same
	// way, and only jobs whose every attempt could be locked (ok) are
	// deleted. Complete locks an attempt and then its job, the opposite
	// order; waiting for an attempt here would deadlock with a retried
	// Complete. A terminal job accepts no new attempt, and a terminal
	// attempt never reopens, so what victims saw stays true. The attempts
	// are deleted explicitly, rather than by the foreign key's cascade, so
	// that they are counted.
	pgPurge = `WITH victims AS (
    SELECT id, attempt_count FROM intentjobs_jobs WHERE ` + pgPurgeable + `
     ORDER BY created_at LIMIT $2
       FOR UPDATE SKIP LOCKED
), att AS (
    SELECT id, job_id FROM intentjobs_attempts WHERE job_id IN (SELECT id FROM victims)
       FOR UPDATE SKIP LOCKED
), ok AS (
    SELECT v.id FROM victims v
     WHERE v.attempt_count = (SELECT COUNT(*) FROM att WHERE att.job_id = v.id)
), da AS (
    DELETE FROM intentjobs_attempts WHERE id IN (SELECT att.id FROM att JOIN ok ON ok.id = att.job_id) RETURNING 1
), dj AS (
    DELETE FROM intentjobs_jobs WHERE id IN (SELECT id FROM ok) RETURNING 1
)
SELECT (SELECT COUNT(*) FROM dj), (SELECT COUNT(*) FROM da)`
)

// The reads that explain a refused write (rowReader).
const (
	// The open attempt that blocks a new attempt or a FailJob, for error
	// reports: one in doubt first, then a running one.
	pgBlocker = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = $1 AND state IN ('starting', 'unknown', 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	pgOtherInDoubt = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = $1 AND id <> $2 AND state IN ('starting', 'unknown') LIMIT 1`

	pgClaimToken = `SELECT claim_token FROM intentjobs_attempts WHERE id = $1`
)

// NotifyClosed.
//
// pgWatchJob marks a job as waited for: the close trigger notifies only
// for a marked job. The UPDATE changes no indexed column (a HOT update) and
// none that a reader of the job sees.
const pgWatchJob = `UPDATE intentjobs_jobs SET watched = true WHERE id = $1 AND NOT watched`

// The schema's channel of notifications: "intentjobs_closed." and the
// name of the schema of the table named by $1 (intentjobs_jobs, as the
// store's statements name it), or the schema's OID where the name would
// make the channel longer than PostgreSQL's 63 bytes. The close trigger of
// 0001_init.sql computes the same.
const pgClosedChannel = `SELECT CASE WHEN octet_length('intentjobs_closed.' || n.nspname) > 63
            THEN 'intentjobs_closed.' || n.oid
            ELSE 'intentjobs_closed.' || n.nspname END
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = $1::regclass`

// Migrating, at the start of the migration's transaction: the lock that
// makes the openers of one schema wait for each other (one lock per
// schema, so that tests in separate schemas do not), the schema of $1 (a
// store opened with Schema) or of the connection's search_path; then, for
// a store opened with Schema, the schema made if it is missing (by name,
// $1, so that a role without the right to create schemas can use one made
// for it), and chosen for the rest of the transaction (its quoted name,
// $1).
const (
	pgMigrateLock   = `SELECT pg_advisory_xact_lock(hashtext('intentjobs.migrate.' || COALESCE(NULLIF($1, ''), current_schema())))`
	pgSchemaMissing = `SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`
	pgCreateSchema  = `CREATE SCHEMA ` // followed by the quoted name
	pgUseSchema     = `SELECT set_config('search_path', $1, true)`
)

// Migrating: whether the database holds the schema of the library's
// development versions ($1 is their version table, known by its column
// applied_at from an application's table of the same name; $2 this one's),
// and the upgrade from the last of them (developmentSchema).
const (
	pgIsDevelopment = `SELECT to_regclass($2) IS NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
    WHERE attrelid = to_regclass($1) AND attname = 'applied_at' AND NOT attisdropped)`

	// The upgrade renames: the tables, their constraints and indexes; the
	// trigger and its function are made again, as 0001_init.sql makes
	// them, since the function now notifies the schema's own channel. The
	// table of waiters, unused since development version 5, goes, and so
	// does the old version table: version 1 is recorded in the new one.
	pgUpgradeDevelopment = `
ALTER TABLE jobs RENAME TO intentjobs_jobs;
ALTER TABLE intentjobs_jobs RENAME CONSTRAINT jobs_pkey TO intentjobs_jobs_pkey;
ALTER TABLE intentjobs_jobs RENAME CONSTRAINT jobs_owner_key_unique TO intentjobs_jobs_owner_key_unique;
ALTER TABLE intentjobs_jobs RENAME CONSTRAINT jobs_state_check TO intentjobs_jobs_state_check;
ALTER TABLE intentjobs_jobs RENAME CONSTRAINT jobs_winner_check TO intentjobs_jobs_winner_check;
ALTER TABLE intentjobs_jobs RENAME CONSTRAINT jobs_closed_check TO intentjobs_jobs_closed_check;
ALTER INDEX jobs_created_at_idx RENAME TO intentjobs_jobs_created_at_idx;

ALTER TABLE job_attempts RENAME TO intentjobs_attempts;
ALTER TABLE intentjobs_attempts RENAME CONSTRAINT job_attempts_pkey TO intentjobs_attempts_pkey;
ALTER TABLE intentjobs_attempts RENAME CONSTRAINT job_attempts_job_id_fkey TO intentjobs_attempts_job_id_fkey;
ALTER TABLE intentjobs_attempts RENAME CONSTRAINT job_attempts_seq_unique TO intentjobs_attempts_seq_unique;
ALTER TABLE intentjobs_attempts RENAME CONSTRAINT job_attempts_state_check TO intentjobs_attempts_state_check;
ALTER TABLE intentjobs_attempts RENAME CONSTRAINT job_attempts_finished_check TO intentjobs_attempts_finished_check;
ALTER INDEX job_attempts_one_in_doubt RENAME TO intentjobs_attempts_one_in_doubt;
ALTER INDEX job_attempts_stale_idx RENAME TO intentjobs_attempts_stale_idx;

ALTER TABLE job_verifications RENAME TO intentjobs_verifications;
ALTER TABLE intentjobs_verifications RENAME CONSTRAINT job_verifications_pkey TO intentjobs_verifications_pkey;
ALTER INDEX job_verifications_lookup_idx RENAME TO intentjobs_verifications_lookup_idx;

DROP TRIGGER jobs_notify_closed ON intentjobs_jobs;
DROP FUNCTION jobs_notify_closed();
CREATE FUNCTION intentjobs_notify_closed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel text := 'intentjobs_closed.' || TG_TABLE_SCHEMA;
BEGIN
    IF octet_length(channel) > 63 THEN
        channel := 'intentjobs_closed.' || (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = TG_RELID);
    END IF;
    PERFORM pg_notify(channel, NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER intentjobs_notify_closed
    AFTER UPDATE OF state ON intentjobs_jobs
    FOR EACH ROW
    WHEN (NEW.watched AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state = ANY ('{succeeded,failed,cancelled}'::text[]))
    EXECUTE FUNCTION intentjobs_notify_closed();

DROP TABLE jobs_waiters;
DROP TABLE jobs_schema_migrations;
CREATE TABLE intentjobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
);
INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (1, '0001_init.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));`
)

// pgStatements are the statements one store runs: the constants above, or,
// for a store opened with Schema, the same with each of the library's
// tables qualified by the schema (qualifyTables). They are made once, when
// the store opens; pgx prepares each text once per connection, as for the
// constants.
type pgStatements struct {
	schema    string // the schema's quoted name, or "" for the search_path's
	jobsTable string // the jobs table as the statements name it, for pgClosedChannel

	createJob, insertJob, replaceJob, jobByID, jobByKey, closeJob  string
	attemptByID, attempts, jobExists, createAttempt, updateAttempt string
	completeJob, completeFate, completeAttempt                     string
	staleAttempts, claimAttempt                                    string
	renewClaim, recordVerification, verifications                  string
	countPurgeable, purge, blocker, otherInDoubt, claimToken       string
	watchJob, schemaVersion, appliedMigrations                     string
}

// pgSearchPathStatements are the statements of a store without Schema.
var pgSearchPathStatements = newPgStatements("")

// newPgStatements returns the statements with the library's tables
// qualified by schema, a quoted name, or as they are for "".
func newPgStatements(schema string) *pgStatements {
	jobsTable := "intentjobs_jobs"
	if schema != "" {
		jobsTable = schema + ".intentjobs_jobs"
	}
	return &pgStatements{
		schema:             schema,
		jobsTable:          jobsTable,
		createJob:          qualifyTables(pgCreateJob, schema),
		insertJob:          qualifyTables(pgInsertJob, schema),
		replaceJob:         qualifyTables(pgReplaceJob, schema),
		jobByID:            qualifyTables(pgJobByID, schema),
		jobByKey:           qualifyTables(pgJobByKey, schema),
		closeJob:           qualifyTables(pgCloseJob, schema),
		attemptByID:        qualifyTables(pgAttemptByID, schema),
		attempts:           qualifyTables(pgAttempts, schema),
		jobExists:          qualifyTables(pgJobExists, schema),
		createAttempt:      qualifyTables(pgCreateAttempt, schema),
		updateAttempt:      qualifyTables(pgUpdateAttempt, schema),
		completeJob:        qualifyTables(pgCompleteJob, schema),
		completeFate:       qualifyTables(pgCompleteFate, schema),
		completeAttempt:    qualifyTables(pgCompleteAttempt, schema),
		staleAttempts:      qualifyTables(pgStaleAttempts, schema),
		claimAttempt:       qualifyTables(pgClaimAttempt, schema),
		renewClaim:         qualifyTables(pgRenewClaim, schema),
		recordVerification: qualifyTables(pgRecordVerification, schema),
		verifications:      qualifyTables(pgVerifications, schema),
		countPurgeable:     qualifyTables(pgCountPurgeable, schema),
		purge:              qualifyTables(pgPurge, schema),
		blocker:            qualifyTables(pgBlocker, schema),
		otherInDoubt:       qualifyTables(pgOtherInDoubt, schema),
		claimToken:         qualifyTables(pgClaimToken, schema),
		watchJob:           qualifyTables(pgWatchJob, schema),
		schemaVersion:      qualifyTables(qSchemaVersion, schema),
		appliedMigrations:  qualifyTables(qAppliedMigrations, schema),
	}
}

// pgTableRef is a reference to one of the library's tables where a
// statement names a table to read or write: after FROM, JOIN, INTO or
// UPDATE. A column qualified by its table (intentjobs_jobs.id) and FOR
// UPDATE OF name the table as the statement itself does, and stay as they
// are.
var pgTableRef = regexp.MustCompile(`\b(FROM|JOIN|INTO|UPDATE)(\s+)(intentjobs_(?:jobs|attempts|verifications|schema_migrations))\b`)

// qualifyTables returns stmt with each table of the library that it reads
// or writes qualified by schema, a quoted name; stmt itself for "".
func qualifyTables(stmt, schema string) string {
	if schema == "" {
		return stmt
	}
	return pgTableRef.ReplaceAllString(stmt, "${1}${2}"+strings.ReplaceAll(schema, "$", "$$")+".${3}")
}
