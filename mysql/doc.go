// Package mysql is a jobs.Store on MySQL 8.0 and MariaDB 10.11, standalone
// or in a Galera cluster, over github.com/go-sql-driver/mysql.
//
// It is written against the exported contract of package jobs alone, as
// any store of a third party would be, and implements the Store with every
// capability: jobs.TxStore (Manager.SubmitTx), jobs.JobLister,
// jobs.ClaimStore (reconcilers), jobs.VerificationStore, jobs.PurgeStore,
// jobs.CloseNotifier (Manager.Wait, by polling: MySQL has no LISTEN), and
// for operators' tools (package console, package inspect, jobsctl)
// jobs.JobCounter, jobs.AttemptLister and jobs.LookupStore, from schema
// version 2.
//
// # Quick start
//
//	s, err := mysql.Open(ctx, "app:secret@tcp(db:3306)/app")
//	if err != nil { … }
//	defer s.Close()
//	m, err := jobs.New(s, jobs.Options{})
//
// Open sets what each of its connections needs: strict SQL mode, READ
// COMMITTED, UTC, and on Galera wsrep_sync_wait=1 (reads see every commit
// made through other nodes). New takes the application's own *sql.DB
// instead, whose sessions must already be strict (ErrNotStrict otherwise).
//
// # How the database enforces the invariants
//
//   - One job per (owner, key): a UNIQUE index on VARBINARY columns, so
//     keys are compared byte for byte (no collation, no padding).
//   - At most one attempt in doubt per job: MySQL has no partial index; a
//     stored generated column holds the job's ID while the attempt is
//     starting or unknown and NULL otherwise, under a UNIQUE index.
//   - Exactly one winner: each write of a job or its attempts is one
//     transaction that locks the job's row (SELECT … FOR UPDATE) and checks
//     versions and states on the rows it locked; the compare-and-swap and
//     the attempt's fate commit together or not at all.
//   - A key is never freed while an attempt of its job may act: ReplaceJob
//     reads the attempts under the old job's row lock, in the transaction
//     that moves the key.
//
// A transaction that deadlocks (1213), waits too long for a lock (1205),
// or loses certification against a write on another Galera node (1213,
// 1180) is rolled back whole and run again, a bounded number of times. No
// driver error reaches a caller: every failure of the database is a
// *jobs.StorageError (a lost connection is of kind StorageUnavailable).
//
// The schema is in Migrations, as plain SQL files that goose and
// golang-migrate read as they are (MigrationsFor); opening a store at an
// older version upgrades it in place.
package mysql
