-- +goose Up
-- jobs schema, version 2 (PostgreSQL): what operators' tools need.
--
-- The last lookup of an attempt: when a reconciler last asked the
-- attempt's provider what became of it, and the answer (LookupStore). A
-- column with a constant default is added without rewriting the table.
ALTER TABLE intentjobs_attempts
    ADD COLUMN lookup_at     timestamptz,
    ADD COLUMN lookup_answer text NOT NULL DEFAULT '';

-- Attempts by their provider's reference, to find the intent behind a
-- provider's request (AttemptLister). Partial: an attempt enters it when
-- its reference is recorded, and an insert writes nothing to it. Building
-- it blocks writes to the attempts for as long as it takes; on a large
-- table, build it first with CREATE INDEX CONCURRENTLY and this name, and
-- the migration leaves it as it is.
CREATE INDEX IF NOT EXISTS intentjobs_attempts_provider_ref_idx ON intentjobs_attempts (provider_ref)
    WHERE provider_ref <> '';

INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (2, '0002_attempt_lookups.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
