-- +goose Up
-- jobs schema, version 4 (PostgreSQL).

-- Waiters. Manager.Wait registers here, on a connection that already
-- LISTENs, before it reads the job again; the close trigger notifies only
-- the jobs that have a waiter. A notification queues behind every other
-- one at commit, under one lock for the whole database: sent for every
-- closed job, it made the commits of all writers wait for each other.
--
-- Registering locks the job's row (FOR SHARE) and the trigger function
-- looks for waiters with a snapshot of its own, taken after the closing
-- UPDATE locked the row: either the waiter registered first, and the
-- trigger sees it, or the job closed first, and the waiter's lock waited
-- for that commit and its read sees the job closed. No wake-up is lost.
-- A row left by a process that died is harmless (one notification too
-- many) and goes when its job is purged.
CREATE TABLE jobs_waiters (
    job_id text        NOT NULL,
    token  text        NOT NULL,
    since  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, token)
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_notify_closed() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs_waiters WHERE job_id = NEW.id) THEN
        PERFORM pg_notify('jobs_closed', NEW.id);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- Room on each page for the new versions of updated rows, so that an
-- update that changes no indexed column stays a HOT update.
ALTER TABLE jobs SET (fillfactor = 80);
ALTER TABLE job_attempts SET (fillfactor = 90);

-- Recorded as version 4 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (4, '0004_waiters_hot_updates.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
