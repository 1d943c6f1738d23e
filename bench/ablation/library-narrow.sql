WITH a AS (
    SELECT id, job_id, base_version, state, claim_token FROM intentjobs_attempts WHERE id = $1 FOR UPDATE
), j AS (
    SELECT intentjobs_jobs.id, intentjobs_jobs.state, intentjobs_jobs.version, intentjobs_jobs.completed_by FROM intentjobs_jobs JOIN a ON intentjobs_jobs.id = a.job_id FOR UPDATE OF intentjobs_jobs
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
    RETURNING intentjobs_jobs.id, intentjobs_jobs.state, intentjobs_jobs.version, intentjobs_jobs.completed_by
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
    RETURNING seq, provider, state, base_version, hedge, provider_ref, reason, created_at
)
SELECT won.*, att.*, att.state = 'succeeded' FROM won, att
UNION ALL
SELECT j.*, att.*, att.state = 'succeeded' FROM j, att WHERE NOT EXISTS (SELECT 1 FROM won)
