WITH a AS (
    SELECT id, job_id, base_version, state, claim_token FROM job_attempts WHERE id = $1 FOR UPDATE
), j AS (
    SELECT jobs.id, jobs.owner, jobs.idempotency_key, jobs.kind, jobs.provider, jobs.params,
    jobs.fingerprint, jobs.state, jobs.version, jobs.attempt_count, jobs.result, jobs.completed_by, jobs.reason,
    jobs.created_at, jobs.updated_at, jobs.closed_at FROM jobs JOIN a ON jobs.id = a.job_id
), won AS (
    UPDATE jobs SET state = 'succeeded', result = $2, completed_by = $1, version = jobs.version + 1,
                    updated_at = $3, closed_at = $3
      FROM a
     WHERE jobs.id = a.job_id
       AND a.state IN ('starting', 'running', 'unknown')
       AND ($4 = '' OR a.claim_token = $4)
       AND jobs.version = a.base_version
       AND jobs.completed_by IS NULL
       AND jobs.state = 'running'
    RETURNING jobs.id, jobs.owner, jobs.idempotency_key, jobs.kind, jobs.provider, jobs.params,
    jobs.fingerprint, jobs.state, jobs.version, jobs.attempt_count, jobs.result, jobs.completed_by, jobs.reason,
    jobs.created_at, jobs.updated_at, jobs.closed_at
), att AS (
    UPDATE job_attempts SET
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
    RETURNING seq, provider, state, base_version, hedge, provider_ref, reason, created_at
)
SELECT won.*, att.*, att.state = 'succeeded' FROM won, att
UNION ALL
SELECT j.*, att.*, att.state = 'succeeded' FROM j, att WHERE NOT EXISTS (SELECT 1 FROM won)
