-- +goose Up
-- jobs schema, version 1 (PostgreSQL).
-- One row per intent in jobs; one row per try in job_attempts.

CREATE TABLE jobs (
    id              text        PRIMARY KEY,
    owner           text        NOT NULL,
    idempotency_key text        NOT NULL,
    kind            text        NOT NULL,
    provider        text        NOT NULL,
    params          json        NOT NULL,
    fingerprint     text        NOT NULL,
    state           text        NOT NULL,
    version         bigint      NOT NULL,
    attempt_count   integer     NOT NULL DEFAULT 0,
    result          json,
    completed_by    text,
    reason          text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    closed_at       timestamptz,

    -- Invariant 1: one job per (owner, key).
    CONSTRAINT jobs_owner_key_unique UNIQUE (owner, idempotency_key),
    CONSTRAINT jobs_state_check CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT jobs_winner_check CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT jobs_closed_check CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (closed_at IS NOT NULL))
);

-- Terminal jobs by age, for retention.
CREATE INDEX jobs_closed_at_idx ON jobs (closed_at) WHERE closed_at IS NOT NULL;

CREATE TABLE job_attempts (
    id           text        PRIMARY KEY,
    job_id       text        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq          integer     NOT NULL,
    provider     text        NOT NULL,
    state        text        NOT NULL,
    base_version bigint      NOT NULL,
    hedge        boolean     NOT NULL DEFAULT false,
    provider_ref text        NOT NULL DEFAULT '',
    reason       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    finished_at  timestamptz,

    CONSTRAINT job_attempts_seq_unique UNIQUE (job_id, seq),
    CONSTRAINT job_attempts_state_check CHECK (state IN ('starting', 'running', 'unknown', 'succeeded', 'lost', 'failed', 'cancelled')),
    CONSTRAINT job_attempts_finished_check CHECK ((state IN ('succeeded', 'lost', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
);

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
    VALUES (1, '0001_init.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
