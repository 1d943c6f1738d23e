UPDATE intentjobs_jobs SET state = 'succeeded', result = $2, completed_by = $1, version = version + 1, updated_at = $3, closed_at = $3
 WHERE (id, version) = (SELECT job_id, base_version FROM intentjobs_attempts
                         WHERE id = $1 AND state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR claim_token = $4)
                         FOR NO KEY UPDATE)
   AND completed_by IS NULL AND state = 'running'
;
UPDATE intentjobs_attempts a SET
    state = CASE WHEN intentjobs_jobs.completed_by = $1 THEN 'succeeded' WHEN intentjobs_jobs.completed_by IS NOT NULL THEN 'lost' ELSE 'cancelled' END,
    reason = CASE WHEN intentjobs_jobs.completed_by = $1 THEN a.reason WHEN intentjobs_jobs.completed_by IS NOT NULL THEN $5 || intentjobs_jobs.completed_by || $6 ELSE $7 || intentjobs_jobs.state END,
    updated_at = $3, finished_at = $3
  FROM intentjobs_jobs
 WHERE a.id = $1 AND intentjobs_jobs.id = a.job_id AND a.state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR a.claim_token = $4)
RETURNING intentjobs_jobs.id, intentjobs_jobs.owner, intentjobs_jobs.idempotency_key, intentjobs_jobs.kind, intentjobs_jobs.provider, intentjobs_jobs.params, intentjobs_jobs.fingerprint, intentjobs_jobs.state, intentjobs_jobs.version,
    intentjobs_jobs.attempt_count, intentjobs_jobs.result, intentjobs_jobs.completed_by, intentjobs_jobs.reason, intentjobs_jobs.created_at, intentjobs_jobs.updated_at, intentjobs_jobs.closed_at,
    a.seq, a.provider, a.state, a.base_version, a.hedge, a.provider_ref, a.reason, a.created_at
