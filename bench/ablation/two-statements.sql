UPDATE jobs SET state = 'succeeded', result = $2, completed_by = $1, version = version + 1, updated_at = $3, closed_at = $3
 WHERE (id, version) = (SELECT job_id, base_version FROM job_attempts
                         WHERE id = $1 AND state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR claim_token = $4)
                         FOR NO KEY UPDATE)
   AND completed_by IS NULL AND state = 'running'
;
UPDATE job_attempts a SET
    state = CASE WHEN jobs.completed_by = $1 THEN 'succeeded' WHEN jobs.completed_by IS NOT NULL THEN 'lost' ELSE 'cancelled' END,
    reason = CASE WHEN jobs.completed_by = $1 THEN a.reason WHEN jobs.completed_by IS NOT NULL THEN $5 || jobs.completed_by || $6 ELSE $7 || jobs.state END,
    updated_at = $3, finished_at = $3
  FROM jobs
 WHERE a.id = $1 AND jobs.id = a.job_id AND a.state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR a.claim_token = $4)
RETURNING jobs.id, jobs.owner, jobs.idempotency_key, jobs.kind, jobs.provider, jobs.params, jobs.fingerprint, jobs.state, jobs.version,
    jobs.attempt_count, jobs.result, jobs.completed_by, jobs.reason, jobs.created_at, jobs.updated_at, jobs.closed_at,
    a.seq, a.provider, a.state, a.base_version, a.hedge, a.provider_ref, a.reason, a.created_at
