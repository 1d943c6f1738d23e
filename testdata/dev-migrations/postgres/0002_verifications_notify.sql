-- +goose Up
-- jobs schema, version 2 (PostgreSQL).

-- Provider verifications: a recorded round trip through a provider whose
-- output passed the contract of a kind, at one contract version.
CREATE TABLE job_verifications (
    id               text        PRIMARY KEY,
    provider         text        NOT NULL,
    kind             text        NOT NULL,
    contract_version text        NOT NULL,
    passed           boolean     NOT NULL,
    reason           text        NOT NULL DEFAULT '',
    verified_at      timestamptz NOT NULL,
    expires_at       timestamptz
);

CREATE INDEX job_verifications_lookup_idx
    ON job_verifications (provider, kind, contract_version, verified_at DESC);

-- Wake waiters when a job reaches a terminal state: NOTIFY jobs_closed, '<job id>'.
-- +goose StatementBegin
CREATE FUNCTION jobs_notify_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobs_closed', NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_notify_closed
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION jobs_notify_closed();

-- Recorded as version 2 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (2, '0002_verifications_notify.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
