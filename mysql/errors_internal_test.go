package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
)

// Every error the driver can return reaches the caller typed: one of
// package jobs' errors, never the driver's type.
func TestInterpret(t *testing.T) {
	t.Parallel()
	my := func(n uint16, msg string) error { return &gomysql.MySQLError{Number: n, Message: msg} }
	tests := []struct {
		name string
		err  error
		kind jobs.StorageKind // "" for an error that is not a StorageError
		want error            // matched with errors.Is
		code string
	}{
		{"deadlock", my(1213, "Deadlock found when trying to get lock; try restarting transaction"), jobs.StorageBusy, jobs.ErrStorage, "1213"},
		{"galera certification", fmt.Errorf("commit: %w", my(1213, "WSREP detected deadlock/conflict and aborted the transaction. Try restarting the transaction")), jobs.StorageBusy, jobs.ErrStorage, "1213"},
		{"galera commit refused", my(1180, "Got error 149 during COMMIT"), jobs.StorageBusy, jobs.ErrStorage, "1180"},
		{"lock wait timeout", my(1205, "Lock wait timeout exceeded; try restarting transaction"), jobs.StorageBusy, jobs.ErrStorage, "1205"},
		{"galera node not primary", my(1047, "WSREP has not yet prepared node for application use"), jobs.StorageUnavailable, jobs.ErrStorage, "1047"},
		{"connection killed", my(1927, "Connection was killed"), jobs.StorageUnavailable, jobs.ErrStorage, "1927"},
		{"server shutdown", my(1053, "Server shutdown in progress"), jobs.StorageUnavailable, jobs.ErrStorage, "1053"},
		{"too many connections", my(1040, "Too many connections"), jobs.StorageUnavailable, jobs.ErrStorage, "1040"},
		{"access denied", my(1045, "Access denied for user"), jobs.StorageUnavailable, jobs.ErrStorage, "1045"},
		{"no such table", my(1146, "Table 'x.intentjobs_jobs' doesn't exist"), jobs.StorageSchema, jobs.ErrStorage, "1146"},
		{"no such column", my(1054, "Unknown column 'write_seq'"), jobs.StorageSchema, jobs.ErrStorage, "1054"},
		{"table full", my(1114, "The table 'intentjobs_jobs' is full"), jobs.StorageFull, jobs.ErrStorage, "1114"},
		{"read only", my(1290, "The MariaDB server is running with the --read-only option"), jobs.StorageReadOnly, jobs.ErrStorage, "1290"},
		{"read only transaction", my(1792, "Cannot execute statement in a READ ONLY transaction"), jobs.StorageReadOnly, jobs.ErrStorage, "1792"},
		{"statement timeout", my(1969, "Query execution was interrupted (max_statement_time exceeded)"), jobs.StorageBusy, jobs.ErrStorage, "1969"},
		{"check violated", my(4025, "CONSTRAINT `intentjobs_jobs_state_check` failed"), jobs.StorageOther, jobs.ErrStorage, "4025"},
		{"duplicate ID", my(1062, "Duplicate entry 'job_1' for key 'PRIMARY'"), jobs.StorageOther, jobs.ErrStorage, "1062"},
		{"invalid connection", gomysql.ErrInvalidConn, jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"bad connection", fmt.Errorf("exec: %w", driver.ErrBadConn), jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"connection done", sql.ErrConnDone, jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"eof", io.ErrUnexpectedEOF, jobs.StorageUnavailable, jobs.ErrStorage, ""},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), jobs.StorageUnavailable, context.Canceled, ""},
		{"deadline", context.DeadlineExceeded, jobs.StorageUnavailable, context.DeadlineExceeded, ""},
		{"anything else", errors.New("driver: something new"), jobs.StorageOther, jobs.ErrStorage, ""},
		{"a key taken", my(1062, "Duplicate entry 'o-k' for key 'intentjobs_jobs_owner_key_unique'"), "", errUniqueKey, ""},
		{"a key taken, MySQL 8", my(1062, "Duplicate entry 'o-k' for key 'intentjobs_jobs.intentjobs_jobs_owner_key_unique'"), "", errUniqueKey, ""},
		{"a second attempt in doubt", my(1062, "Duplicate entry 'job_1' for key 'intentjobs_attempts_one_in_doubt'"), "", errUniqueInDoubt, ""},
		{"the package's own", &jobs.JobClosedError{JobID: "job_1", State: jobs.JobSucceeded}, "", jobs.ErrJobClosed, ""},
		{"not found", jobNotFound("job_1"), "", jobs.ErrNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := interpret("op", tc.err)
			if !errors.Is(got, tc.want) {
				t.Errorf("interpret(%v) = %v; want it to match %v", tc.err, got, tc.want)
			}
			var me *gomysql.MySQLError
			var ne net.Error
			// (context.DeadlineExceeded is a net.Error itself.)
			if errors.As(got, &me) || (errors.As(got, &ne) && !errors.Is(got, context.DeadlineExceeded)) {
				t.Errorf("interpret(%v) = %v: the driver's error is reachable", tc.err, got)
			}
			var se *jobs.StorageError
			switch {
			case tc.kind == "" && errors.As(got, &se):
				t.Errorf("interpret(%v) = %v; want no StorageError", tc.err, got)
			case tc.kind != "" && (!errors.As(got, &se) || se.Kind != tc.kind || se.Code != tc.code || se.Op != "op"):
				t.Errorf("interpret(%v) = %#v; want a StorageError of kind %s, code %q", tc.err, got, tc.kind, tc.code)
			}
			if want := retryableNumber(tc.err); retryable(tc.err) != want {
				t.Errorf("retryable(%v) = %v", tc.err, !want)
			}
		})
	}
}

func retryableNumber(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205 || me.Number == 1180)
}

// An ALTER TABLE that finds its column or index added meanwhile by
// another opener is done; any other error of a migration is not.
func TestAddedMeanwhile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&gomysql.MySQLError{Number: 1060, Message: "Duplicate column name 'lookup_at'"}, true},
		{fmt.Errorf("exec: %w", &gomysql.MySQLError{Number: 1061, Message: "Duplicate key name 'intentjobs_attempts_provider_ref_idx'"}), true},
		{&gomysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{&gomysql.MySQLError{Number: 1146, Message: "Table 'x' doesn't exist"}, false},
		{errors.New("1060"), false},
		{nil, false},
	} {
		if got := addedMeanwhile(tc.err); got != tc.want {
			t.Errorf("addedMeanwhile(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}
