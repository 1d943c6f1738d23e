UPDATE jobs SET state = 'succeeded', result = $2, completed_by = $1, version = version + 1, updated_at = $3, closed_at = $3
 WHERE (id, version) = (SELECT job_id, base_version FROM job_attempts
                         WHERE id = $1 AND state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR claim_token = $4)
                         FOR NO KEY UPDATE)
   AND completed_by IS NULL AND state = 'running'
RETURNING id, owner, idempotency_key, kind, provider, params, fingerprint, state, version, attempt_count, result, completed_by, reason, created_at, updated_at, closed_at
;
UPDATE job_attempts a SET
    state = CASE WHEN j.completed_by = $1 THEN 'succeeded' WHEN j.completed_by IS NOT NULL THEN 'lost' ELSE 'cancelled' END,
    reason = CASE WHEN j.completed_by = $1 THEN a.reason WHEN j.completed_by IS NOT NULL THEN $5 || j.completed_by || $6 ELSE $7 || j.state END,
    updated_at = $3, finished_at = $3
  FROM jobs j
 WHERE a.id = $1 AND j.id = a.job_id AND a.state = ANY ('{starting,running,unknown}'::text[]) AND ($4 = '' OR a.claim_token = $4)
RETURNING a.seq, a.provider, a.state, a.base_version, a.hedge, a.provider_ref, a.reason, a.created_at, j.completed_by, j.state
