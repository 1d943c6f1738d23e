package mysql

// The statements of the store, in the order of the methods that run them.
// None uses UPDATE … RETURNING (MySQL has none): a write that must answer
// with rows runs in a transaction that locks them first (SELECT … FOR
// UPDATE), decides on what it locked, writes, and answers from what it
// read and wrote. Every string is quoted with single quotes, so that an
// application's ANSI_QUOTES does not change a statement.

// CreateJob, CreateJobTx, ReplaceJob, Job, JobByKey.
const (
	qInsertJob = `INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint,
    state, version, attempt_count, reason, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 1, 0, '', ?, ?)`

	qJobByID = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE id = ?`

	qJobByKey = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE owner = ? AND idempotency_key = ?`

	// In a caller's transaction under REPEATABLE READ, a plain read would
	// see the transaction's snapshot, which may predate the duplicate
	// that the insert just ran into; a locking read sees the latest
	// committed row.
	qJobByKeyLocking = qJobByKey + ` LOCK IN SHARE MODE`

	qLockJob = `SELECT ` + jobCols + ` FROM intentjobs_jobs WHERE id = ? FOR UPDATE`

	// ReplaceJob's guard, read under the old job's row lock: an attempt
	// that may still act (starting, running or unknown), or one whose
	// result was dropped (lost, or cancelled with a dropped reason). The
	// first column orders the answer: one in doubt, then a running one,
	// then a dropped result.
	qReplaceGuard = `SELECT id, state, reason FROM intentjobs_attempts
    WHERE job_id = ? AND (state IN ('starting', 'unknown', 'running') OR state = 'lost'
          OR (state = 'cancelled' AND reason IN (?, ?)))
    ORDER BY CASE state WHEN 'starting' THEN 0 WHEN 'unknown' THEN 0 WHEN 'running' THEN 1 ELSE 2 END, seq
    LIMIT 1`

	qRetireKey = `UPDATE intentjobs_jobs SET idempotency_key = ? WHERE id = ?`
)

// CloseJob.
const qCloseJob = `UPDATE intentjobs_jobs SET state = ?, version = version + 1, reason = ?, updated_at = ?, closed_at = ?
    WHERE id = ?`

// Attempt, Attempts, and the reads of the attempt writes.
const (
	qAttemptByID = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE id = ?`

	qAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts WHERE job_id = ? ORDER BY seq`

	qJobExists = `SELECT 1 FROM intentjobs_jobs WHERE id = ?`

	// The open attempt that blocks a new attempt or a FailJob: one in
	// doubt first, then a running one.
	qBlocker = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = ? AND state IN ('starting', 'unknown', 'running')
    ORDER BY CASE state WHEN 'running' THEN 1 ELSE 0 END, seq LIMIT 1`

	qOtherInDoubt = `SELECT id, state FROM intentjobs_attempts
    WHERE job_id = ? AND id <> ? AND state IN ('starting', 'unknown') ORDER BY seq LIMIT 1`

	// The attempt and its job, both locked, the attempt first: every
	// write of an attempt takes its locks in this order (STRAIGHT_JOIN
	// keeps the optimizer from reading the job first).
	qLockAttemptAndJob = `SELECT a.id, a.job_id, a.seq, a.provider, a.state, a.base_version, a.hedge, a.provider_ref,
    a.reason, a.created_at, a.updated_at, a.finished_at, a.claim_token,
    j.id, j.owner, j.idempotency_key, j.kind, j.provider, j.params, j.fingerprint, j.state, j.version,
    j.attempt_count, j.result, j.completed_by, j.reason, j.created_at, j.updated_at, j.closed_at
    FROM intentjobs_attempts a STRAIGHT_JOIN intentjobs_jobs j ON j.id = a.job_id
    WHERE a.id = ? FOR UPDATE`

	// Bumps the job's hidden write_seq: see 0001_init.sql.
	qTouchJob = `UPDATE intentjobs_jobs SET write_seq = write_seq + 1 WHERE id = ?`
)

// CreateAttempt.
const (
	qInsertAttempt = `INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, hedge,
    provider_ref, reason, created_at, updated_at, claim_token)
    VALUES (?, ?, ?, ?, 'starting', ?, ?, '', '', ?, ?, '')`

	qJobStarted = `UPDATE intentjobs_jobs SET state = 'running', attempt_count = ?, updated_at = ? WHERE id = ?`
)

// UpdateAttempt.
const qUpdateAttempt = `UPDATE intentjobs_attempts SET state = ?, provider_ref = ?, reason = ?, updated_at = ?, finished_at = ?
    WHERE id = ?`

// CompleteAttempt: the compare-and-swap. Both rows are locked already
// (qLockAttemptAndJob); the guard of the job's update repeats what was
// checked on them, so that the statement alone could never complete a job
// twice.
const (
	// The winner's job and attempt in one statement: two rows change.
	qCompleteJob = `UPDATE intentjobs_jobs j, intentjobs_attempts a
    SET j.state = 'succeeded', j.result = ?, j.completed_by = a.id, j.version = j.version + 1,
        j.updated_at = ?, j.closed_at = ?, a.state = 'succeeded', a.updated_at = ?, a.finished_at = ?
    WHERE j.id = ? AND j.version = ? AND j.completed_by IS NULL AND j.state = 'running'
      AND a.id = ? AND a.job_id = j.id AND a.state IN ('starting', 'running', 'unknown')`

	qAttemptFate = `UPDATE intentjobs_attempts SET state = ?, reason = ?, updated_at = ?, finished_at = ? WHERE id = ?`
)

// ListJobs, CountJobs and ListAttempts are built condition by condition:
// see inspect.go.

// RecordLookup and ReconcileStates.
const (
	qRecordLookup = `UPDATE intentjobs_attempts SET lookup_at = ?, lookup_answer = ? WHERE id = ?`

	qAttemptExists = `SELECT 1 FROM intentjobs_attempts WHERE id = ?`

	// Followed by the IDs' placeholders and a closing parenthesis.
	qReconcileStates = `SELECT id, lookup_at, lookup_answer, claim_token, claimed_until
    FROM intentjobs_attempts WHERE id IN (`
)

// StaleAttempts, ClaimAttempt and RenewClaim.
const (
	// Served by intentjobs_attempts_stale_idx (state, updated_at).
	qStaleAttempts = `SELECT ` + attemptCols + ` FROM intentjobs_attempts
    WHERE ((state = 'unknown' AND updated_at < ?) OR (state IN ('starting', 'running') AND updated_at < ?))
      AND (claimed_until IS NULL OR claimed_until <= ?)
    ORDER BY updated_at, id
    LIMIT ?`

	qLockClaim = `SELECT ` + attemptCols + `, claim_token, claimed_until FROM intentjobs_attempts WHERE id = ? FOR UPDATE`

	qClaim = `UPDATE intentjobs_attempts SET claim_token = ?, claimed_until = ? WHERE id = ?`

	qRenewClaim = `UPDATE intentjobs_attempts SET claimed_until = ? WHERE id = ?`
)

// RecordVerification and Verifications.
const (
	qRecordVerification = `INSERT INTO intentjobs_verifications (` + verificationCols + `)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

	// Served by intentjobs_verifications_lookup_idx when provider, kind and
	// contract version are given, as CheckFailover gives them.
	qVerifications = `SELECT ` + verificationCols + ` FROM intentjobs_verifications
    WHERE (? = '' OR provider = ?) AND (? = '' OR kind = ?) AND (? = '' OR contract_version = ?)
    ORDER BY verified_at DESC, id DESC LIMIT ?`
)

// PurgeJobs.
const (
	// A job is purgeable when it is terminal (closed_at is set exactly
	// then), closed before the time, and has no open attempt. A terminal
	// job accepts no new attempt and a terminal attempt never reopens, so
	// what the subquery saw stays true.
	qPurgeable = `created_at < ? AND closed_at < ?
      AND NOT EXISTS (SELECT 1 FROM intentjobs_attempts a
                      WHERE a.job_id = intentjobs_jobs.id AND a.state IN ('starting', 'running', 'unknown'))`

	qCountPurgeable = `SELECT COUNT(*), COALESCE(SUM(attempt_count), 0) FROM intentjobs_jobs WHERE ` + qPurgeable

	// A batch never waits for a lock: SKIP LOCKED passes over the jobs
	// and attempts that writers hold (MySQL 8.0, MariaDB 10.6 and later).
	qPurgeVictims = `SELECT id, attempt_count FROM intentjobs_jobs WHERE ` + qPurgeable + `
    ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED`
)

// NotifyClosed: which of the jobs waited for are terminal.
const qClosedAmong = `SELECT id FROM intentjobs_jobs WHERE closed_at IS NOT NULL AND id IN (`

// The schema's version.
const (
	qSchemaVersion     = `SELECT COALESCE(MAX(version), 0) FROM intentjobs_schema_migrations`
	qAppliedMigrations = `SELECT version, name, applied_at FROM intentjobs_schema_migrations ORDER BY version`
)
