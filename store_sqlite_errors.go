package jobs

import (
	"errors"
	"strconv"
	"strings"
)

// SQLite's primary result codes that the store tells apart.
const (
	sqliteError      = 1
	sqliteBusyCode   = 5
	sqliteLocked     = 6
	sqliteReadOnly   = 8
	sqliteIOErr      = 10
	sqliteFull       = 13
	sqliteCantOpen   = 14
	sqliteConstraint = 19
	sqliteNotADB     = 26

	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// sqliteCode finds the extended result code SQLite gave for err: from
// mattn/go-sqlite3's error (store_sqlite_cgo.go), or from any driver's
// error with a Code() int method, such as modernc.org/sqlite's.
func sqliteCode(err error) (int, bool) {
	if code, ok := mattnCode(err); ok {
		return code, true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code(), true
	}
	return 0, false
}

// sqliteBusy reports whether err is SQLite's "database is locked": the
// statement did not run and can be run again.
func sqliteBusy(err error) bool {
	if err == nil {
		return false
	}
	var se *StorageError
	if errors.As(err, &se) {
		return se.Kind == StorageBusy
	}
	code, ok := sqliteCode(err)
	if !ok {
		return strings.Contains(err.Error(), "database is locked")
	}
	return code&0xff == sqliteBusyCode || code&0xff == sqliteLocked
}

// interpret maps SQLite's errors to this package's errors, by result code,
// whichever driver reported them.
func (s *SQLiteStore) interpret(op string, err error) error {
	if err, ok := passThrough(op, err); ok {
		return err
	}
	msg := err.Error()
	code, ok := sqliteCode(err)
	if !ok {
		kind := StorageOther
		if strings.Contains(msg, "database is locked") {
			kind = StorageBusy
		}
		return &StorageError{Op: op, Kind: kind, Message: msg}
	}
	if code == sqliteConstraintUnique || code == sqliteConstraintPrimaryKey {
		switch {
		case strings.Contains(msg, "intentjobs_jobs.owner, intentjobs_jobs.idempotency_key"):
			return errUniqueKey
		case strings.Contains(msg, "intentjobs_attempts.job_id") && !strings.Contains(msg, "seq"):
			return errUniqueInDoubt
		}
	}
	kind := StorageOther
	switch code & 0xff {
	case sqliteBusyCode, sqliteLocked:
		kind = StorageBusy
	case sqliteFull:
		kind = StorageFull
	case sqliteReadOnly:
		kind = StorageReadOnly
	case sqliteCantOpen, sqliteIOErr, sqliteNotADB:
		kind = StorageUnavailable
	case sqliteError:
		if strings.Contains(msg, "no such table") {
			kind = StorageSchema
		}
	}
	// The extended code's number: SQLITE_BUSY_SNAPSHOT (517) reads apart
	// from SQLITE_BUSY (5).
	return &StorageError{Op: op, Kind: kind, Code: strconv.Itoa(code), Message: msg}
}
