-- +goose Up
-- jobs schema, version 1 (PostgreSQL).
-- One row per intent in intentjobs_jobs; one row per try in
-- intentjobs_attempts. Every name the library creates starts with
-- intentjobs_, so that its tables live beside an application's own (a
-- table named jobs, say) in one schema.

CREATE TABLE intentjobs_jobs (
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
    -- Set by Manager.Wait, once it listens, with an UPDATE of the job's
    -- row, and never cleared: a stale mark costs one notification that
    -- nobody hears. The close trigger below notifies only for a marked
    -- job. The mark and a close cannot miss each other: if the waiter's
    -- UPDATE commits first, the closing UPDATE changes the row version that
    -- carries the mark (PostgreSQL re-reads a row that changed while the
    -- statement ran) and the trigger sees it; if the close locks the row
    -- first, the waiter's UPDATE waits for its commit, and the waiter's
    -- read of the job, after its own commit, sees the job closed.
    watched         boolean     NOT NULL DEFAULT false,

    -- Invariant 1: one job per (owner, key).
    CONSTRAINT intentjobs_jobs_owner_key_unique UNIQUE (owner, idempotency_key),
    -- Every list of states is one array constant, state = ANY
    -- ('{a,b,c}'::text[]), rather than state IN ('a', 'b', 'c'). The two
    -- mean the same; they cost differently. PostgreSQL reads a table's
    -- CHECK constraints back from their stored form and plans them again
    -- for every statement that writes the table (and a trigger's WHEN
    -- clause for every statement that may fire it): an IN list is stored
    -- as an array expression with one constant per state, which every
    -- statement folds into an array again; an array constant is stored,
    -- and read, as one value.
    CONSTRAINT intentjobs_jobs_state_check
        CHECK (state = ANY ('{pending,running,succeeded,failed,cancelled}'::text[])),
    -- A job has a winner and a result exactly when it succeeded.
    CONSTRAINT intentjobs_jobs_winner_check
        CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL)),
    CONSTRAINT intentjobs_jobs_closed_check
        CHECK ((state = ANY ('{succeeded,failed,cancelled}'::text[])) = (closed_at IS NOT NULL))
)
-- Room on each page for the new versions of updated rows, so that an
-- update that changes no indexed column stays a HOT update: PostgreSQL
-- writes the new version of the row on the same page and adds no index
-- entry.
WITH (fillfactor = 80);

-- Jobs by age, for retention, which reads closed jobs by created_at, oldest
-- first: a job closed before a time was created before it. An index on
-- closed_at, which every close sets, would keep closing a job (Complete,
-- FailJob, CancelJob) from being a HOT update; created_at never changes.
CREATE INDEX intentjobs_jobs_created_at_idx ON intentjobs_jobs (created_at);

CREATE TABLE intentjobs_attempts (
    id            text        PRIMARY KEY,
    job_id        text        NOT NULL REFERENCES intentjobs_jobs (id) ON DELETE CASCADE,
    seq           integer     NOT NULL,
    provider      text        NOT NULL,
    state         text        NOT NULL,
    base_version  bigint      NOT NULL,
    hedge         boolean     NOT NULL DEFAULT false,
    provider_ref  text        NOT NULL DEFAULT '',
    reason        text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    -- Reconciler claims. A reconciler that examines an attempt in doubt
    -- first claims it: claim_token names the claim, claimed_until ends its
    -- lease. Nobody else claims the attempt before then, and the write that
    -- records what the provider said must present the token: once another
    -- reconciler has taken the attempt over (after the lease), that write
    -- changes nothing.
    claim_token   text        NOT NULL DEFAULT '',
    claimed_until timestamptz,

    CONSTRAINT intentjobs_attempts_seq_unique UNIQUE (job_id, seq),
    CONSTRAINT intentjobs_attempts_state_check
        CHECK (state = ANY ('{starting,running,unknown,succeeded,lost,failed,cancelled}'::text[])),
    CONSTRAINT intentjobs_attempts_finished_check
        CHECK ((state = ANY ('{succeeded,lost,failed,cancelled}'::text[])) = (finished_at IS NOT NULL))
)
WITH (fillfactor = 90);

-- Invariant 3: at most one attempt per job in doubt (starting or unknown).
CREATE UNIQUE INDEX intentjobs_attempts_one_in_doubt ON intentjobs_attempts (job_id)
    WHERE state IN ('starting', 'unknown');

-- Open attempts by age, with the end of their claim, for the reconcilers'
-- StaleAttempts.
CREATE INDEX intentjobs_attempts_stale_idx ON intentjobs_attempts (updated_at, claimed_until)
    WHERE state IN ('starting', 'running', 'unknown');

-- Provider verifications: a recorded round trip through a provider whose
-- output passed the contract of a kind, at one contract version.
CREATE TABLE intentjobs_verifications (
    id               text        PRIMARY KEY,
    provider         text        NOT NULL,
    kind             text        NOT NULL,
    contract_version text        NOT NULL,
    passed           boolean     NOT NULL,
    reason           text        NOT NULL DEFAULT '',
    verified_at      timestamptz NOT NULL,
    expires_at       timestamptz
);

CREATE INDEX intentjobs_verifications_lookup_idx
    ON intentjobs_verifications (provider, kind, contract_version, verified_at DESC);

-- Wake waiters when a watched job reaches a terminal state:
-- NOTIFY "intentjobs_closed.<schema>", '<job id>'. The channel names the
-- schema of the table, so that stores in two schemas of one database do
-- not wake each other's waiters. A channel name has at most 63 bytes: for
-- a schema whose name is too long for that, the channel carries the
-- schema's OID instead. PostgresStore listens on the same channel.
-- +goose StatementBegin
CREATE FUNCTION intentjobs_notify_closed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel text := 'intentjobs_closed.' || TG_TABLE_SCHEMA;
BEGIN
    IF octet_length(channel) > 63 THEN
        channel := 'intentjobs_closed.' || (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = TG_RELID);
    END IF;
    PERFORM pg_notify(channel, NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The WHEN clause reads the mark on the row itself: a close that nobody
-- waits for calls no function, and notifies nobody. A notification queues
-- behind every other one at commit, under one lock for the whole
-- database: sent for every closed job, it would make the commits of all
-- writers wait for each other.
CREATE TRIGGER intentjobs_notify_closed
    AFTER UPDATE OF state ON intentjobs_jobs
    FOR EACH ROW
    WHEN (NEW.watched AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state = ANY ('{succeeded,failed,cancelled}'::text[]))
    EXECUTE FUNCTION intentjobs_notify_closed();

-- The schema's version. Every migration records itself here, whatever
-- applies it: the library, goose, golang-migrate or a plain run of the file.
CREATE TABLE IF NOT EXISTS intentjobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
);
INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (1, '0001_init.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
