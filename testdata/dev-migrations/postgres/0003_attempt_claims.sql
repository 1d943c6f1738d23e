-- +goose Up
-- jobs schema, version 3 (PostgreSQL).

-- Reconciler claims. A reconciler that examines an attempt in doubt first
-- claims it: claim_token names the claim, claimed_until ends its lease.
-- Nobody else claims the attempt before then, and the write that records
-- what the provider said must present the token: once another reconciler
-- has taken the attempt over (after the lease), that write changes nothing.
ALTER TABLE job_attempts ADD COLUMN claim_token   text NOT NULL DEFAULT '';
ALTER TABLE job_attempts ADD COLUMN claimed_until timestamptz;

-- Open attempts by age, with the end of their claim, for the reconcilers'
-- StaleAttempts (it replaces the index on updated_at alone).
DROP INDEX job_attempts_open_idx;
CREATE INDEX job_attempts_stale_idx ON job_attempts (updated_at, claimed_until)
    WHERE state IN ('starting', 'running', 'unknown');

-- Recorded as version 3 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (3, '0003_attempt_claims.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
