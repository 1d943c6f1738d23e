-- +goose Up
-- jobs schema, version 5 (PostgreSQL).
--
-- Closing a job (Complete, FailJob, CancelJob) becomes a HOT update: it
-- changes no column that an index covers, so PostgreSQL writes the new
-- version of the row on the same page and adds no index entry. Two things
-- stood in the way:
--
--  * jobs_closed_at_idx covered closed_at, which every close sets. Retention
--    now reads jobs by created_at, which never changes: a job closed before
--    a time was created before it.
--  * the close trigger ran a function for every closed job, to look for a
--    waiter. A waiter now marks its job (watched), and the trigger's WHEN
--    clause reads the mark on the row itself: a close that nobody waits for
--    calls no function.

DROP INDEX jobs_closed_at_idx;
CREATE INDEX jobs_created_at_idx ON jobs (created_at);

-- Set by Manager.Wait, once it listens, with an UPDATE of the job's row, and
-- never cleared: a stale mark costs one notification that nobody hears.
-- The mark and a close cannot miss each other: if the waiter's UPDATE
-- commits first, the closing UPDATE changes the row version that carries
-- the mark (PostgreSQL re-reads a row that changed while the statement ran)
-- and the trigger sees it; if the close locks the row first, the waiter's
-- UPDATE waits for its commit, and the waiter's read of the job, after its
-- own commit, sees the job closed.
ALTER TABLE jobs ADD COLUMN watched boolean NOT NULL DEFAULT false;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION jobs_notify_closed() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_notify('jobs_closed', NEW.id);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DROP TRIGGER jobs_notify_closed ON jobs;
CREATE TRIGGER jobs_notify_closed
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.watched AND OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION jobs_notify_closed();

-- jobs_waiters stays, unused by this version, for the processes of the
-- previous one that run until they are replaced: their waiters still add
-- rows there (a close no longer reads them: those waiters are woken by
-- their poll, within five seconds), and their purges still delete from it.
-- Purge deletes the rows of the jobs it removes.

-- Recorded as version 5 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (5, '0005_hot_closes.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
