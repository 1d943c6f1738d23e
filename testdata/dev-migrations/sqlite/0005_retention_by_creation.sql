-- +goose Up
-- jobs schema, version 5 (SQLite).

-- Retention reads closed jobs by created_at, oldest first, in the same order
-- as on PostgreSQL (where an index on closed_at, which every close sets,
-- kept the close from being a HOT update). A job closed before a time was
-- created before it. SQLite has no HOT updates: the index stays partial, so
-- that a job enters it when it closes, as before, and an insert writes
-- nothing to it.
DROP INDEX jobs_closed_at_idx;
CREATE INDEX jobs_created_at_idx ON jobs (created_at) WHERE closed_at IS NOT NULL;

-- Recorded as version 5 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (5, '0005_retention_by_creation.sql', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (version) DO NOTHING;
