WITH a AS (
    SELECT job_id, base_version FROM job_attempts
     WHERE id = $1 AND state IN ('starting', 'running', 'unknown')
), won AS (
    UPDATE jobs SET result = $2, completed_by = $1, state = 'succeeded', version = jobs.version + 1, updated_at = $3, closed_at = $3
      FROM a
     WHERE jobs.id = a.job_id AND jobs.version = a.base_version AND jobs.completed_by IS NULL
    RETURNING jobs.id
)
UPDATE job_attempts SET state = CASE WHEN EXISTS (SELECT 1 FROM won) THEN 'succeeded' ELSE 'lost' END, finished_at = $3, updated_at = $3
 WHERE id = $1 AND state IN ('starting', 'running', 'unknown') AND $4 = '' AND $5 <> $6 AND $7 <> ''
RETURNING state = 'succeeded'
