-- +goose Up
-- jobs schema, version 6 (PostgreSQL).
--
-- The same CHECK constraints and close trigger, with every list of states
-- written as one array constant, state = ANY ('{a,b,c}'::text[]), instead
-- of state IN ('a', 'b', 'c'). The two mean the same; they cost differently.
-- PostgreSQL reads a table's CHECK constraints back from their stored form
-- and plans them again for every statement that writes the table, and a
-- trigger's WHEN clause for every statement that may fire it. An IN list is
-- stored as an array expression with one constant per state, which every
-- statement parses and folds into an array again; an array constant is
-- stored, and read, as one value.
--
-- Replacing a constraint checks every row against it, under the lock that
-- the migration's transaction holds on the table until it commits: a scan of
-- each table.

ALTER TABLE jobs
    DROP CONSTRAINT jobs_state_check,
    DROP CONSTRAINT jobs_closed_check,
    ADD CONSTRAINT jobs_state_check
        CHECK (state = ANY ('{pending,running,succeeded,failed,cancelled}'::text[])),
    ADD CONSTRAINT jobs_closed_check
        CHECK ((state = ANY ('{succeeded,failed,cancelled}'::text[])) = (closed_at IS NOT NULL));

ALTER TABLE job_attempts
    DROP CONSTRAINT job_attempts_state_check,
    DROP CONSTRAINT job_attempts_finished_check,
    ADD CONSTRAINT job_attempts_state_check
        CHECK (state = ANY ('{starting,running,unknown,succeeded,lost,failed,cancelled}'::text[])),
    ADD CONSTRAINT job_attempts_finished_check
        CHECK ((state = ANY ('{succeeded,lost,failed,cancelled}'::text[])) = (finished_at IS NOT NULL));

DROP TRIGGER jobs_notify_closed ON jobs;
CREATE TRIGGER jobs_notify_closed
    AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.watched AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state = ANY ('{succeeded,failed,cancelled}'::text[]))
    EXECUTE FUNCTION jobs_notify_closed();

-- Recorded as version 6 (see 0001_init.sql).
INSERT INTO jobs_schema_migrations (version, name, applied_at)
    VALUES (6, '0006_state_lists_as_arrays.sql', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    ON CONFLICT (version) DO NOTHING;
