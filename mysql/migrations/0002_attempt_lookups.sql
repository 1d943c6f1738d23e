-- +goose Up
-- jobs schema, version 2 (MySQL 8.0 and MariaDB 10.11, Galera included):
-- what operators' tools need.
--
-- MySQL has no ADD COLUMN IF NOT EXISTS (MariaDB has), and every DDL
-- statement commits by itself. So that the file can run again after a run
-- that stopped half way, as 0001 can, each change is one ALTER TABLE,
-- prepared only when what it adds is missing; the choice and the ALTER are
-- plain statements, with no DELIMITER and no procedure, that goose and
-- golang-migrate run as they are. The columns are added instantly, without
-- copying the table (MariaDB 10.3 and MySQL 8.0.12 and later), and the
-- index is built in place from every attempt while writes go on. On
-- Galera each ALTER TABLE is replicated in total order and holds the
-- cluster's writes to the table while it runs: on a large table, add the
-- index first with the cluster's online schema tools under this name, and
-- the migration leaves it as it is.

-- The last lookup of an attempt: when a reconciler last asked the
-- attempt's provider what became of it, and the answer (LookupStore).
SET @intentjobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.columns
        WHERE table_schema = DATABASE() AND table_name = 'intentjobs_attempts' AND column_name = 'lookup_answer'),
    'DO 0',
    'ALTER TABLE intentjobs_attempts
        ADD COLUMN lookup_at     DATETIME(6)   NULL,
        ADD COLUMN lookup_answer VARCHAR(4096) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''''');
PREPARE intentjobs_ddl FROM @intentjobs_ddl;
EXECUTE intentjobs_ddl;
DEALLOCATE PREPARE intentjobs_ddl;

-- Attempts by their provider's reference, to find the intent behind a
-- provider's request (AttemptLister). MySQL has no partial index, and a
-- reference may be longer than an index key: the index holds the first
-- 255 characters of every attempt's reference (an empty one for those
-- without), and a lookup reads the few rows whose reference begins alike.
SET @intentjobs_ddl = IF(EXISTS (SELECT 1 FROM information_schema.statistics
        WHERE table_schema = DATABASE() AND table_name = 'intentjobs_attempts'
          AND index_name = 'intentjobs_attempts_provider_ref_idx'),
    'DO 0',
    'ALTER TABLE intentjobs_attempts ADD KEY intentjobs_attempts_provider_ref_idx (provider_ref(255))');
PREPARE intentjobs_ddl FROM @intentjobs_ddl;
EXECUTE intentjobs_ddl;
DEALLOCATE PREPARE intentjobs_ddl;

INSERT INTO intentjobs_schema_migrations (version, name, applied_at)
    VALUES (2, '0002_attempt_lookups.sql', DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ'))
    ON DUPLICATE KEY UPDATE version = version;
