package jobs

// The statements of SQLiteStore, in the order of the methods that run them
// (store_sqlite.go). Times are Unix microseconds; parameters are numbered
// (?1, ?2, …), so that one can appear twice.
//
// SQLite evaluates an IN list of three or more values, constants or
// parameters, through a transient table it builds for each execution, and
// a RETURNING clause through another: each costs a page cache of its own
// and several allocations. The statements of the hot paths therefore spell
// such lists as comparisons joined by OR, and write without RETURNING where
// the store knows what it wrote. The schema does the same in its CHECK
// constraints and partial indexes, which every insert and update
// evaluates.

// CreateJob and CreateJobTx.
const (
	// CreateJob's insert writes nothing for a key that is taken; the job
	// it writes is the one given, so it returns nothing.
	sqliteCreateJob = `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', 1, ?8, ?8)
    ON CONFLICT (owner, idempotency_key) DO NOTHING`
)

// ReplaceJob retires the old job's key and creates the new job in one
// step, as on PostgreSQL (see pgReplaceJob): a retired job holds
// RetiredKey(key, new job's ID) in the key's column.
const (
	// sqliteReplaceBlocker is SQLiteStore.ReplaceJob's first statement:
	// the attempt that keeps the old job's key, if the job still holds the
	// key in one of the states that would free it and an attempt of it may
	// still act.
	sqliteReplaceBlocker = `SELECT a.id, a.state FROM intentjobs_attempts a JOIN intentjobs_jobs j ON j.id = a.job_id
    WHERE j.id = ?1 AND j.owner = ?2 AND j.idempotency_key = ?3 AND j.state IN (?4, ?5, ?6)
      AND (a.state = 'starting' OR a.state = 'unknown' OR a.state = 'running')
    ORDER BY CASE a.state WHEN 'running' THEN 1 ELSE 0 END, a.seq LIMIT 1`

	// sqliteRetireKey is SQLiteStore.ReplaceJob's second statement, after
	// sqliteReplaceBlocker found no attempt of the old job open; the third is
	// sqliteCreateJob. The write lock, taken at BEGIN, makes them atomic
	// against every other writer. An attempt whose result was dropped
	// keeps the key with its job, as in pgReplaceJob.
	sqliteRetireKey = `UPDATE intentjobs_jobs SET idempotency_key = ?4
    WHERE id = ?1 AND owner = ?2 AND idempotency_key = ?3 AND state IN (?5, ?6, ?7)
      AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                       WHERE a.job_id = ?1 AND a.state = 'cancelled'
                         AND a.reason IN ('` + ReasonDroppedJobCancelled + `', '` + ReasonDroppedJobFailed + `'))`
)

// Job and JobByKey.
const (
	sqliteJobByID = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE id = ?1`

	sqliteJobByKey = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE owner = ?1 AND idempotency_key = ?2`
)

// CloseJob.
const (
	// CloseJob fails or cancels an open job; with ?5 (fail), only while no
	// attempt is open. The write lock makes the guard exact.
	sqliteCloseJob = `UPDATE intentjobs_jobs SET state = ?2, version = version + 1, reason = ?3, updated_at = ?4, closed_at = ?4
    WHERE id = ?1 AND state IN ('pending', 'running')
      AND (NOT ?5 OR NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                                 WHERE a.job_id = ?1 AND (a.state = 'starting' OR a.state = 'running' OR a.state = 'unknown')))
    RETURNING ` + jobCols
)

// Attempt and Attempts.
const (
	sqliteAttemptByID = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE id = ?1`

	sqliteAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE job_id = ?1 ORDER BY seq`

	sqliteJobExists = `SELECT 1 FROM intentjobs_jobs WHERE id = ?1`
)

// CreateAttempt and UpdateAttempt.
const (
	// StartAttempt's guard and count on the job row: the job must be open
	// and no attempt may be in doubt (nor running, unless ?4 allows a
	// hedge). It returns what the attempt's insert needs.
	sqliteOpenJob = `UPDATE intentjobs_jobs SET state = 'running', attempt_count = attempt_count + 1, updated_at = ?3
    WHERE id = ?1 AND state IN ('pending', 'running')
      AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                      WHERE a.job_id = ?1
                        AND (a.state IN ('starting', 'unknown') OR (a.state = 'running' AND NOT ?4)))
    RETURNING version, attempt_count, COALESCE(NULLIF(?2, ''), provider)`

	// The attempt it inserts is known from its arguments: it returns
	// nothing.
	sqliteInsertAttempt = `INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, 'starting', ?5, ?6, ?7, ?7)`

	// UpdateAttempt: as pgUpdateAttempt on PostgreSQL, but it
	// returns only the columns the update does not set: the rest (the ID,
	// the state, the times, a reference or reason given) are the call's
	// own, and '' stands for a reference or reason the call sets. (An open
	// attempt has no finished_at: intentjobs_attempts_finished_check.)
	sqliteUpdateAttempt = `UPDATE intentjobs_attempts SET
        state        = ?2,
        provider_ref = CASE WHEN ?3 = '' THEN provider_ref ELSE ?3 END,
        reason       = CASE WHEN ?4 = '' THEN reason ELSE ?4 END,
        updated_at   = ?5,
        finished_at  = CASE WHEN ?6 THEN ?5 ELSE finished_at END
    WHERE id = ?1 AND (state = ?7 OR state = ?8 OR state = ?9) AND (?3 = '' OR provider_ref = '')
      AND (?10 = '' OR claim_token = ?10)
    RETURNING job_id, seq, provider, base_version, hedge, created_at,
        CASE WHEN ?3 = '' THEN provider_ref ELSE '' END, CASE WHEN ?4 = '' THEN reason ELSE '' END`
)

// CompleteAttempt: the compare-and-swap of cas.go, then the attempt's move.
const (
	// sqliteCompleteJob is the compare-and-swap of Complete on SQLite, the first
	// statement of SQLiteStore.CompleteAttempt's immediate transaction, with the
	// attempt (?1), the result (?2), the time (?3) and a reconciler's claim
	// token or an empty string (?4). It reads the attempt itself, in the
	// subquery: the job changes only if the attempt is open (and, for a
	// reconciler's write, claimed with ?4) and the job is still at the
	// attempt's BaseVersion, has no winner and is running. It returns the job
	// as it changed it, or no row.
	sqliteCompleteJob = `UPDATE intentjobs_jobs SET state = 'succeeded', result = ?2, completed_by = ?1, version = version + 1,
                updated_at = ?3, closed_at = ?3
 WHERE (id, version) = (SELECT job_id, base_version FROM intentjobs_attempts
                         WHERE id = ?1 AND (state = 'starting' OR state = 'running' OR state = 'unknown')
                           AND (?4 = '' OR claim_token = ?4))
   AND completed_by IS NULL AND state = 'running'
RETURNING ` + jobCols

	// Complete's last step for the winner, once sqliteCompleteJob changed
	// its job.
	sqliteWinAttempt = `UPDATE intentjobs_attempts SET state = 'succeeded', updated_at = ?2, finished_at = ?2
    WHERE id = ?1 AND (state = 'starting' OR state = 'running' OR state = 'unknown')
    RETURNING ` + attemptCols

	// Complete's steps for a loser, once sqliteCompleteJob refused: its
	// job, read through the attempt, then the attempt's move to lost or
	// cancelled (?2) with its reason (?3), guarded as the swap was (open,
	// and claimed with ?5 if ?5 is not empty), returning the attempt.
	sqliteJobOfAttempt = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE id = (SELECT job_id FROM intentjobs_attempts WHERE id = ?1)`
	sqliteLoseAttempt  = `UPDATE intentjobs_attempts SET state = ?2, reason = ?3, updated_at = ?4, finished_at = ?4
    WHERE id = ?1 AND (state = 'starting' OR state = 'running' OR state = 'unknown')
      AND (?5 = '' OR claim_token = ?5)
    RETURNING ` + attemptCols
)

// StaleAttempts, ClaimAttempt and RenewClaim.
const (
	// Served by intentjobs_attempts_stale_idx (updated_at, claimed_until;
	// partial on open states): its predicate is repeated word for word, as
	// SQLite uses a partial index only for a query that says what it says.
	sqliteStaleAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts
    WHERE (state = 'starting' OR state = 'running' OR state = 'unknown')
      AND updated_at < ?3
      AND ((state = 'unknown' AND updated_at < ?1) OR (state <> 'unknown' AND updated_at < ?2))
      AND (claimed_until IS NULL OR claimed_until <= ?5)
    ORDER BY updated_at, id
    LIMIT ?4`

	sqliteClaimAttempt = `UPDATE intentjobs_attempts SET claim_token = ?4, claimed_until = ?6
    WHERE id = ?1 AND state = ?2 AND updated_at = ?3
      AND (claimed_until IS NULL OR claimed_until <= ?5)
    RETURNING ` + attemptCols

	sqliteRenewClaim = `UPDATE intentjobs_attempts SET claimed_until = ?3 WHERE id = ?1 AND claim_token = ?2`
)

// RecordVerification and Verifications.
const (
	sqliteRecordVerification = `INSERT INTO intentjobs_verifications (` + verificationCols + `)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`

	sqliteVerifications = `SELECT ` + verificationCols + ` FROM intentjobs_verifications
    WHERE (?1 = '' OR provider = ?1) AND (?2 = '' OR kind = ?2) AND (?3 = '' OR contract_version = ?3)
    ORDER BY verified_at DESC, id DESC LIMIT ?4`
)

// PurgeJobs.
const (
	// Purgeable jobs, read through intentjobs_jobs_created_at_idx
	// (partial: closed jobs only), oldest first, as on PostgreSQL
	// (pgPurgeable).
	sqlitePurgeable = `closed_at IS NOT NULL AND created_at < ?1 AND closed_at < ?1
      AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                      WHERE a.job_id = intentjobs_jobs.id AND (a.state = 'starting' OR a.state = 'running' OR a.state = 'unknown'))`

	sqlitePurgeCandidates = `SELECT id FROM intentjobs_jobs WHERE ` + sqlitePurgeable + ` ORDER BY created_at LIMIT ?2`

	sqliteCountPurgeable = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM intentjobs_jobs WHERE ` + sqlitePurgeable

	// A batch's deletes, each followed by the list of the batch's job IDs,
	// one parameter each: the attempts first, then their jobs.
	sqlitePurgeAttempts = `DELETE FROM intentjobs_attempts WHERE job_id IN `
	sqlitePurgeJobs     = `DELETE FROM intentjobs_jobs WHERE id IN `
)

// The reads that explain a refused write (rowReader).
const (
	sqliteBlocker = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = ?1 AND (state = 'starting' OR state = 'unknown' OR state = 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	sqliteOtherInDoubt = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = ?1 AND id <> ?2 AND state IN ('starting', 'unknown') LIMIT 1`

	sqliteClaimToken = `SELECT claim_token FROM intentjobs_attempts WHERE id = ?1`
)

// Migrating: whether the database holds the schema of the library's
// development versions (?1 is their version table, known by its column
// applied_at from an application's table of the same name; ?2 this one's),
// and the upgrade from the last of them (developmentSchema).
const (
	sqliteIsDevelopment = `SELECT NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?2)
   AND EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = 'applied_at')`

	// SQLite renames tables but neither the constraints named in their
	// definition nor indexes: the upgrade runs after 0001_init.sql, which
	// creates the tables of version 1 and records it, and copies every row
	// into them, then drops the old tables. The attempts table goes before
	// the jobs table, so that dropping jobs deletes no attempt through the
	// foreign key.
	sqliteUpgradeDevelopment = `
INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
        attempt_count, result, completed_by, reason, created_at, updated_at, closed_at)
    SELECT id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
        attempt_count, result, completed_by, reason, created_at, updated_at, closed_at
    FROM jobs;
INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
        created_at, updated_at, finished_at, claim_token, claimed_until)
    SELECT id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
        created_at, updated_at, finished_at, claim_token, claimed_until
    FROM job_attempts;
INSERT INTO intentjobs_verifications (id, provider, kind, contract_version, passed, reason, verified_at, expires_at)
    SELECT id, provider, kind, contract_version, passed, reason, verified_at, expires_at
    FROM job_verifications;
DROP TABLE job_attempts;
DROP TABLE jobs;
DROP TABLE job_verifications;
DROP TABLE jobs_schema_migrations;`
)
