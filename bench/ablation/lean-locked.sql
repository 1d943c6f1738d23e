WITH a AS (
    SELECT job_id, base_version FROM intentjobs_attempts
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown') FOR UPDATE
), won AS (
    UPDATE intentjobs_jobs SET result = $2, completed_by = $1, state = 'succeeded', version = intentjobs_jobs.version + 1, updated_at = $3, closed_at = $3
      FROM a
     WHERE intentjobs_jobs.id = a.job_id AND intentjobs_jobs.version = a.base_version AND intentjobs_jobs.completed_by IS NULL
    RETURNING intentjobs_jobs.id
)
UPDATE intentjobs_attempts SET state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded' ELSE 'lost' END, finished_at = $3, updated_at = $3
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown') AND $4 = '' AND $5 <> $6 AND $7 <> ''
RETURNING state = 'succeeded'
