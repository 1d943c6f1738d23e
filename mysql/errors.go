package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
)

// ErrNotStrict is what opening a store returns, having written nothing,
// when the session's sql_mode has neither STRICT_TRANS_TABLES nor
// STRICT_ALL_TABLES: without either, MySQL silently truncates a value too
// long for its column, or stores a zero date, instead of refusing the
// write. Open sets strict mode in each session itself; New needs a *sql.DB
// whose sessions are strict (the server's default, or the DSN parameter
// sql_mode).
var ErrNotStrict = errors.New("jobs/mysql: the session's sql_mode is not strict")

// The server's error numbers that the store acts on.
const (
	erDupEntry          = 1062 // duplicate entry for a unique key
	erLockWaitTimeout   = 1205 // lock wait timeout exceeded
	erLockDeadlock      = 1213 // deadlock, and a Galera certification failure
	erErrorDuringCommit = 1180 // Galera: the commit was refused after it began
	erWsrepNotReady     = 1047 // Galera: the node is not in the primary component
	erNoSuchTable       = 1146
	erBadField          = 1054
	erBadDB             = 1049
	erRecordFileFull    = 1114 // the table is full
	erDiskFull          = 1021
	erOptionPreventsRO  = 1290 // --read-only (or super_read_only)
	erCantExecuteInRO   = 1792 // a READ ONLY transaction
	erInnodbReadOnly    = 1874
	erServerShutdown    = 1053
	erConnectionKilled  = 1927 // MariaDB: the connection was killed
	erQueryInterrupted  = 1317
	erTooManyConns      = 1040
	erConCount          = 1203 // max_user_connections
	erQueryTimeout      = 1969 // MariaDB: max_statement_time exceeded
	erExecutionTimeout  = 3024 // MySQL: max_execution_time exceeded
	erClientInactivity  = 4031 // MySQL: disconnected for inactivity
	erLockAborted       = 1689 // the wait for a lock was aborted
	erCheckViolated     = 4025 // MariaDB: CHECK constraint failed
	erCheckViolatedMy   = 3819 // MySQL: CHECK constraint failed
	erNotSupportedYet   = 1235 // e.g. GET_LOCK under Galera
	erDataTooLong       = 1406
	erDupFieldName      = 1060 // ALTER TABLE: the column exists
	erDupKeyName        = 1061 // ALTER TABLE: the index exists
	erAccessDenied      = 1045
	erDBAccessDenied    = 1044
	erTableAccessDenied = 1142
)

// The unique indexes whose violations the store expects. A violation of
// any other is a *jobs.StorageError.
var (
	errUniqueKey     = errors.New("unique violation: intentjobs_jobs (owner, idempotency_key)")
	errUniqueInDoubt = errors.New("unique violation: one attempt in doubt per job")
)

// retryable reports whether err ended the transaction because of a
// concurrent write, so that running the whole transaction again may
// succeed: a deadlock or a Galera certification failure (1213), a lock wait
// timeout (1205), or a commit refused by Galera (1180). The server has
// rolled the transaction back, or will when the store does.
func retryable(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erLockDeadlock, erLockWaitTimeout, erErrorDuringCommit:
		return true
	}
	return false
}

// interpret maps an error of the driver to this package's: nil, the errors
// of package jobs (which pass as they are), the two unique violations the
// store expects, and a *jobs.StorageError for every other failure of the
// database, whose kind says what the caller can do about it. No driver
// error type leaves it.
func interpret(op string, err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) || isJobsError(err) ||
		errors.Is(err, errUniqueKey) || errors.Is(err, errUniqueInDoubt) {
		return err
	}
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return jobs.NewStorageError(jobs.StorageUnavailable, op, "", err)
		}
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		if me.Number == erDupEntry {
			switch {
			case dupOn(me, "intentjobs_jobs_owner_key_unique"):
				return errUniqueKey
			case dupOn(me, "intentjobs_attempts_one_in_doubt"):
				return errUniqueInDoubt
			}
		}
		return jobs.NewStorageError(kindOf(me.Number), op, strconv.Itoa(int(me.Number)), err)
	}
	if lostConnection(err) {
		return jobs.NewStorageError(jobs.StorageUnavailable, op, "", err)
	}
	return jobs.NewStorageError(jobs.StorageOther, op, "", err)
}

// isJobsError reports whether err is one of package jobs' answers, which
// a store returns as they are.
func isJobsError(err error) bool {
	var se *jobs.StorageError
	if errors.As(err, &se) {
		return true
	}
	for _, target := range []error{jobs.ErrNotFound, jobs.ErrKeyConflict, jobs.ErrAttemptInFlight, jobs.ErrLostRace,
		jobs.ErrInvalidTransition, jobs.ErrJobClosed, jobs.ErrInvalidInput, jobs.ErrClaimLost, ErrNotStrict} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// dupOn reports whether a duplicate-entry error is on the unique index
// named index. MySQL 8.0.19 and later name it table.index, MariaDB and
// older MySQL index alone, both quoted at the end of the message.
func dupOn(me *gomysql.MySQLError, index string) bool {
	return strings.HasSuffix(me.Message, "'"+index+"'") || strings.HasSuffix(me.Message, "."+index+"'")
}

// kindOf classifies the server's error numbers.
func kindOf(n uint16) jobs.StorageKind {
	switch n {
	case erLockDeadlock, erLockWaitTimeout, erErrorDuringCommit, erQueryTimeout, erExecutionTimeout, erLockAborted:
		return jobs.StorageBusy
	case erRecordFileFull, erDiskFull:
		return jobs.StorageFull
	case erOptionPreventsRO, erCantExecuteInRO, erInnodbReadOnly:
		return jobs.StorageReadOnly
	case erNoSuchTable, erBadField:
		return jobs.StorageSchema
	case erWsrepNotReady, erServerShutdown, erConnectionKilled, erQueryInterrupted, erTooManyConns, erConCount,
		erClientInactivity, erBadDB, erAccessDenied, erDBAccessDenied:
		return jobs.StorageUnavailable
	}
	return jobs.StorageOther
}

// lostConnection reports whether err means the connection to the server
// broke or could not be made.
func lostConnection(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	return errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, gomysql.ErrPktSync) ||
		errors.Is(err, gomysql.ErrPktSyncMul) || errors.Is(err, gomysql.ErrMalformPkt) ||
		errors.As(err, &netErr) || errors.As(err, &opErr)
}
