-- +goose Up
-- jobs schema, version 1 (SQLite).
-- One row per intent in jobs; one row per try in job_attempts.
-- Times are Unix microseconds (UTC); JSON is stored as text.

CREATE TABLE jobs (
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
    CONSTRAINT jobs_state_check CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT jobs_winner_check CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT jobs_closed_check CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (closed_at IS NOT NULL))
) STRICT;

-- Terminal jobs by age, for retention.
CREATE INDEX jobs_closed_at_idx ON jobs (closed_at) WHERE closed_at IS NOT NULL;

CREATE TABLE job_attempts (
    id           TEXT    PRIMARY KEY,
    job_id       TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    provider     TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    base_version INTEGER NOT NULL,
    hedge        INTEGER NOT NULL DEFAULT 0,
    provider_ref TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER,

    CONSTRAINT job_attempts_seq_unique UNIQUE (job_id, seq),
    CONSTRAINT job_attempts_state_check CHECK (state IN ('starting', 'running', 'unknown', 'succeeded', 'lost', 'failed', 'cancelled')),
    CONSTRAINT job_attempts_finished_check CHECK ((state IN ('succeeded', 'lost', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
) STRICT;

-- Invariant 3: at most one attempt per job in doubt (starting or unknown).
CREATE UNIQUE INDEX job_attempts_one_in_doubt ON job_attempts (job_id) WHERE state IN ('starting', 'unknown');

-- Open attempts by age, for reconcilers.
CREATE INDEX job_attempts_open_idx ON job_attempts (updated_at) WHERE state IN ('starting', 'running', 'unknown');

-- The schema's version. Every migration records itself here, whatever
-- applies it: the library, goose, golang-migrate or a plain run of the file.
CREATE TABLE IF NOT EXISTS jobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
);
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (1, '0001_init.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
