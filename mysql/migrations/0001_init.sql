-- +goose Up
-- jobs schema, version 1 (MySQL 8.0 and MariaDB 10.11, Galera included).
-- One row per intent in intentjobs_jobs; one row per try in
-- intentjobs_attempts. Every name starts with intentjobs_, so that the
-- tables live beside an application's own in one database.
--
-- Identifiers (IDs, owner, idempotency key, kind, provider, fingerprint,
-- claim tokens) are VARBINARY: compared byte for byte, with no collation
-- at all. A case-insensitive collation would bind Key-1 and key-1 to one
-- job; even utf8mb4_bin pads with spaces (PAD SPACE) on both servers, so
-- that 'key' and 'key ' would collide in the unique index. Free text
-- (reasons, provider references, params and results) is utf8mb4 with its
-- binary collation, readable in any client.
--
-- Times are DATETIME(6): microseconds, always UTC, written by the store as
-- text in UTC whatever the session's time zone.
--
-- Every statement stands alone (no DELIMITER, no procedure), and every
-- index is declared inside its CREATE TABLE, so that each table is made in
-- one atomic statement and a run interrupted half way can simply run again.

CREATE TABLE IF NOT EXISTS intentjobs_jobs (
    id              VARBINARY(255)  NOT NULL,
    owner           VARBINARY(255)  NOT NULL,
    idempotency_key VARBINARY(640)  NOT NULL,
    kind            VARBINARY(255)  NOT NULL,
    provider        VARBINARY(255)  NOT NULL,
    params          LONGTEXT        CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fingerprint     VARBINARY(255)  NOT NULL,
    state           VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version         BIGINT          NOT NULL,
    attempt_count   INT             NOT NULL DEFAULT 0,
    result          LONGTEXT        CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    completed_by    VARBINARY(255)  NULL,
    reason          VARCHAR(4096)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    created_at      DATETIME(6)     NOT NULL,
    updated_at      DATETIME(6)     NOT NULL,
    closed_at       DATETIME(6)     NULL,
    -- Bumped by a write that decides on the job's attempts without
    -- changing the job itself (an attempt moving to unknown): the update
    -- takes the job's row lock, and on Galera it makes that write conflict
    -- at certification with any concurrent write of the job on another
    -- node. Never read.
    write_seq       BIGINT          NOT NULL DEFAULT 0,

    PRIMARY KEY (id),
    -- Invariant 1: one job per (owner, key), byte for byte.
    UNIQUE KEY intentjobs_jobs_owner_key_unique (owner, idempotency_key),
    -- Retention reads closed jobs by age, oldest first: a job closed before
    -- a time was created before it.
    KEY intentjobs_jobs_created_at_idx (created_at),

    CONSTRAINT intentjobs_jobs_state_check
        CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT intentjobs_jobs_winner_check
        CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT intentjobs_jobs_closed_check
        CHECK ((state IN ('succeeded', 'failed', 'cancelled')) = (closed_at IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS intentjobs_attempts (
    id            VARBINARY(255)  NOT NULL,
    job_id        VARBINARY(255)  NOT NULL,
    seq           INT             NOT NULL,
    provider      VARBINARY(255)  NOT NULL,
    state         VARCHAR(16)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    base_version  BIGINT          NOT NULL,
    hedge         BOOLEAN         NOT NULL DEFAULT FALSE,
    provider_ref  VARCHAR(4096)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    reason        VARCHAR(4096)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    created_at    DATETIME(6)     NOT NULL,
    updated_at    DATETIME(6)     NOT NULL,
    finished_at   DATETIME(6)     NULL,
    -- Reconciler claims: claim_token names the claim, claimed_until ends
    -- its lease (see jobs.ClaimStore).
    claim_token   VARBINARY(255)  NOT NULL DEFAULT '',
    claimed_until DATETIME(6)     NULL,
    -- Invariant 3 (at most one attempt per job in doubt). MySQL has no
    -- partial index: this column is the job's ID while the attempt is
    -- starting or unknown and NULL otherwise, and a unique index holds any
    -- number of NULLs but each job at most once.
    in_doubt_job  VARBINARY(255)
        AS (CASE WHEN state IN ('starting', 'unknown') THEN job_id END) STORED,

    PRIMARY KEY (id),
    UNIQUE KEY intentjobs_attempts_seq_unique (job_id, seq),
    UNIQUE KEY intentjobs_attempts_one_in_doubt (in_doubt_job),
    -- Open attempts by age, for the reconcilers' StaleAttempts.
    KEY intentjobs_attempts_stale_idx (state, updated_at),
    -- No ON DELETE action: MySQL refuses one on the base column of a stored
    -- generated column, and retention deletes the attempts itself.
    CONSTRAINT intentjobs_attempts_job_fk FOREIGN KEY (job_id) REFERENCES intentjobs_jobs (id),

    CONSTRAINT intentjobs_attempts_state_check
        CHECK (state IN ('starting', 'running', 'unknown', 'succeeded', 'lost', 'failed', 'cancelled')),
    CONSTRAINT intentjobs_attempts_finished_check
        CHECK ((state IN ('succeeded', 'lost', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Provider verifications: a recorded round trip through a provider whose
-- output passed the contract of a kind, at one contract version.
CREATE TABLE IF NOT EXISTS intentjobs_verifications (
    id               VARBINARY(255) NOT NULL,
    provider         VARBINARY(255) NOT NULL,
    kind             VARBINARY(255) NOT NULL,
    contract_version VARBINARY(255) NOT NULL,
    passed           BOOLEAN        NOT NULL,
    reason           VARCHAR(4096)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    verified_at      DATETIME(6)    NOT NULL,
    expires_at       DATETIME(6)    NULL,

    PRIMARY KEY (id),
    KEY intentjobs_verifications_lookup_idx (provider, kind, contract_version, verified_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The schema's version. Every migration records itself here, whatever
-- applies it: the store, goose, golang-migrate or a plain run of the file.
CREATE TABLE IF NOT EXISTS intentjobs_schema_migrations (
    version    INT          NOT NULL,
    name       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    applied_at VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    PRIMARY KEY (version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (1, '0001_init.sql', DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'))
    ON DUPLICATE KEY UPDATE version = version;
