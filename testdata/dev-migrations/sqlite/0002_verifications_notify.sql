-- +goose Up
-- jobs schema, version 2 (SQLite).

-- Provider verifications: a recorded round trip through a provider whose
-- output passed the contract of a kind, at one contract version.
CREATE TABLE job_verifications (
    id               TEXT    PRIMARY KEY,
    provider         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    contract_version TEXT    NOT NULL,
    passed           INTEGER NOT NULL,
    reason           TEXT    NOT NULL DEFAULT '',
    verified_at      INTEGER NOT NULL,
    expires_at       INTEGER
) STRICT;

CREATE INDEX job_verifications_lookup_idx
    ON job_verifications (provider, kind, contract_version, verified_at DESC);

-- SQLite has no notifications: waiters poll.

-- Recorded as version 2 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (2, '0002_verifications_notify.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
