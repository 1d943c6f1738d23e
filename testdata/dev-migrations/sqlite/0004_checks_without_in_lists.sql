-- +goose Up
-- jobs schema, version 4 (SQLite).

-- The same tables, constraints and indexes, with every list of three or
-- more states spelled as comparisons joined by OR. SQLite evaluates
-- "state IN ('a', 'b', 'c')" through a transient table that it builds
-- anew for every statement that checks it: every insert and update of
-- these tables paid for two to four of them (a CHECK constraint, the
-- predicate of a partial index).
-- A CHECK constraint cannot be altered in place, so both tables are
-- rebuilt and their rows copied, in this migration's transaction.
--
-- The order keeps foreign keys intact with foreign_keys on (a migration
-- cannot turn them off inside its transaction): the new attempts table
-- refers to the new jobs table from the start, the old attempts table is
-- dropped before the old jobs table (so that dropping it deletes no
-- attempt), and renaming jobs_new to jobs renames the reference with it
-- (as SQLite does unless legacy_alter_table is on: it is turned off here,
-- which is its default).

PRAGMA legacy_alter_table = OFF;

CREATE TABLE jobs_new (
    id              TEXT    PRIMARY KEY,
    owner           TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    provider        TEXT    NOT NULL,
    params          TEXT    NOT NULL CHECK (json_valid(params)),
    fingerprint     TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    version         INTEGER NOT NULL,
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    result          TEXT    CHECK (result IS NULL OR json_valid(result)),
    completed_by    TEXT,
    reason          TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    closed_at       INTEGER,

    -- Invariant 1: one job per (owner, key).
    CONSTRAINT jobs_owner_key_unique UNIQUE (owner, idempotency_key),
    CONSTRAINT jobs_state_check CHECK (state = 'pending' OR state = 'running'
        OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled'),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT jobs_winner_check CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT jobs_closed_check CHECK ((state = 'succeeded' OR state = 'failed' OR state = 'cancelled')
        = (closed_at IS NOT NULL))
) STRICT;

INSERT INTO jobs_new (id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
        attempt_count, result, completed_by, reason, created_at, updated_at, closed_at)
    SELECT id, owner, idempotency_key, kind, provider, params, fingerprint, state, version,
        attempt_count, result, completed_by, reason, created_at, updated_at, closed_at
    FROM jobs;

CREATE TABLE job_attempts_new (
    id            TEXT    PRIMARY KEY,
    job_id        TEXT    NOT NULL REFERENCES jobs_new (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    provider      TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    base_version  INTEGER NOT NULL,
    hedge         INTEGER NOT NULL DEFAULT 0,
    provider_ref  TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    claim_token   TEXT    NOT NULL DEFAULT '',
    claimed_until INTEGER,

    CONSTRAINT job_attempts_seq_unique UNIQUE (job_id, seq),
    CONSTRAINT job_attempts_state_check CHECK (state = 'starting' OR state = 'running' OR state = 'unknown'
        OR state = 'succeeded' OR state = 'lost' OR state = 'failed' OR state = 'cancelled'),
    CONSTRAINT job_attempts_finished_check CHECK ((state = 'succeeded' OR state = 'lost' OR state = 'failed'
        OR state = 'cancelled') = (finished_at IS NOT NULL))
) STRICT;

INSERT INTO job_attempts_new (id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
        created_at, updated_at, finished_at, claim_token, claimed_until)
    SELECT id, job_id, seq, provider, state, base_version, hedge, provider_ref, reason,
        created_at, updated_at, finished_at, claim_token, claimed_until
    FROM job_attempts;

DROP TABLE job_attempts;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
ALTER TABLE job_attempts_new RENAME TO job_attempts;

-- Terminal jobs by age, for retention.
CREATE INDEX jobs_closed_at_idx ON jobs (closed_at) WHERE closed_at IS NOT NULL;

-- Invariant 3: at most one attempt per job in doubt (starting or unknown).
-- (A list of two is evaluated without a transient table.)
CREATE UNIQUE INDEX job_attempts_one_in_doubt ON job_attempts (job_id) WHERE state IN ('starting', 'unknown');

-- Open attempts by age, with the end of their claim, for the reconcilers'
-- StaleAttempts, which repeats this predicate word for word so that SQLite
-- uses the index.
CREATE INDEX job_attempts_stale_idx ON job_attempts (updated_at, claimed_until)
    WHERE state = 'starting' OR state = 'running' OR state = 'unknown';

-- Recorded as version 4 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (4, '0004_checks_without_in_lists.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
