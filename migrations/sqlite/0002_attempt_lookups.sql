-- +goose Up
-- jobs schema, version 2 (SQLite): what operators' tools need.
--
-- The last lookup of an attempt: when a reconciler last asked the
-- attempt's provider what became of it (Unix microseconds), and the answer
-- (LookupStore).
ALTER TABLE intentjobs_attempts ADD COLUMN lookup_at INTEGER;
ALTER TABLE intentjobs_attempts ADD COLUMN lookup_answer TEXT NOT NULL DEFAULT '';

-- Attempts by their provider's reference, to find the intent behind a
-- provider's request (AttemptLister). Partial: an attempt enters it when
-- its reference is recorded, and an insert writes nothing to it.
CREATE INDEX IF NOT EXISTS intentjobs_attempts_provider_ref_idx ON intentjobs_attempts (provider_ref)
    WHERE provider_ref <> '';

INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (2, '0002_attempt_lookups.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
