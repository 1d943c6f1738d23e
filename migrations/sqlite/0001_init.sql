-- +goose Up
-- jobs schema, version 1 (SQLite).
-- One row per intent in intentjobs_jobs; one row per try in
-- intentjobs_attempts. Every name the library creates starts with
-- intentjobs_, so that its tables live beside an application's own (a
-- table named jobs, say) in one database.
-- Times are Unix microseconds (UTC); JSON is stored as text.
--
-- Every list of three or more states is spelled as comparisons joined by
-- OR. SQLite evaluates "state IN ('a', 'b', 'c')" through a transient
-- table that it builds anew for every statement that checks it, and every
-- insert and update of these tables checks several (a CHECK constraint,
-- the predicate of a partial index). A list of two is evaluated without
-- one.

CREATE TABLE intentjobs_jobs (
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
    CONSTRAINT intentjobs_jobs_owner_key_unique UNIQUE (owner, idempotency_key),
    CONSTRAINT intentjobs_jobs_state_check CHECK (state = 'pending' OR state = 'running'
        OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled'),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT intentjobs_jobs_winner_check CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT intentjobs_jobs_closed_check CHECK ((state = 'succeeded' OR state = 'failed' OR state = 'cancelled')
        = (closed_at IS NOT NULL))
) STRICT;

-- Closed jobs by age, for retention, which reads them by created_at, oldest
-- first, in the same order as on PostgreSQL: a job closed before a time
-- was created before it. The index is partial, so that a job enters it
-- when it closes and an insert writes nothing to it.
CREATE INDEX intentjobs_jobs_created_at_idx ON intentjobs_jobs (created_at) WHERE closed_at IS NOT NULL;

CREATE TABLE intentjobs_attempts (
    id            TEXT    PRIMARY KEY,
    job_id        TEXT    NOT NULL REFERENCES intentjobs_jobs (id) ON DELETE CASCADE,
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
    -- Reconciler claims. A reconciler that examines an attempt in doubt
    -- first claims it: claim_token names the claim, claimed_until ends its
    -- lease. Nobody else claims the attempt before then, and the write that
    -- records what the provider said must present the token: once another
    -- reconciler has taken the attempt over (after the lease), that write
    -- changes nothing.
    claim_token   TEXT    NOT NULL DEFAULT '',
    claimed_until INTEGER,

    CONSTRAINT intentjobs_attempts_seq_unique UNIQUE (job_id, seq),
    CONSTRAINT intentjobs_attempts_state_check CHECK (state = 'starting' OR state = 'running' OR state = 'unknown'
        OR state = 'succeeded' OR state = 'lost' OR state = 'failed' OR state = 'cancelled'),
    CONSTRAINT intentjobs_attempts_finished_check CHECK ((state = 'succeeded' OR state = 'lost' OR state = 'failed'
        OR state = 'cancelled') = (finished_at IS NOT NULL))
) STRICT;

-- Invariant 3: at most one attempt per job in doubt (starting or unknown).
CREATE UNIQUE INDEX intentjobs_attempts_one_in_doubt ON intentjobs_attempts (job_id) WHERE state IN ('starting', 'unknown');

-- Open attempts by age, with the end of their claim, for the reconcilers'
-- StaleAttempts, which repeats this predicate word for word so that SQLite
-- uses the index.
CREATE INDEX intentjobs_attempts_stale_idx ON intentjobs_attempts (updated_at, claimed_until)
    WHERE state = 'starting' OR state = 'running' OR state = 'unknown';

-- Provider verifications: a recorded round trip through a provider whose
-- output passed the contract of a kind, at one contract version.
CREATE TABLE intentjobs_verifications (
    id               TEXT    PRIMARY KEY,
    provider         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    contract_version TEXT    NOT NULL,
    passed           INTEGER NOT NULL,
    reason           TEXT    NOT NULL DEFAULT '',
    verified_at      INTEGER NOT NULL,
    expires_at       INTEGER
) STRICT;

CREATE INDEX intentjobs_verifications_lookup_idx
    ON intentjobs_verifications (provider, kind, contract_version, verified_at DESC);

-- SQLite has no notifications: waiters poll.

-- The schema's version. Every migration records itself here, whatever
-- applies it: the library, goose, golang-migrate or a plain run of the file.
CREATE TABLE IF NOT EXISTS intentjobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
);
INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (1, '0001_init.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
