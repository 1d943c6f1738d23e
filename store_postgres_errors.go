package jobs

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// interpret maps pgx's errors to this package's errors: the two unique
// violations the store expects by their constraint's name, the rest to a
// *StorageError whose kind says what the caller can do about it, by
// PostgreSQL's error code (SQLSTATE).
func (s *PostgresStore) interpret(op string, err error) error {
	if err, ok := passThrough(op, err); ok {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "23505" {
			switch pgErr.ConstraintName {
			case "intentjobs_jobs_owner_key_unique":
				return errUniqueKey
			case "intentjobs_attempts_one_in_doubt":
				return errUniqueInDoubt
			}
		}
		kind := StorageOther
		switch {
		case pgErr.Code == "53100" || pgErr.Code == "53200" || pgErr.Code == "54000":
			kind = StorageFull
		case pgErr.Code == "25006":
			kind = StorageReadOnly
		case pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03":
			kind = StorageBusy
		case pgErr.Code == "42P01" || pgErr.Code == "42703" || pgErr.Code == "3F000": // no such table, column or schema
			kind = StorageSchema
		case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "57P"), pgErr.Code == "53300":
			kind = StorageUnavailable
		}
		return &StorageError{Op: op, Kind: kind, Code: pgErr.Code, Message: pgErr.Message}
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, sql.ErrConnDone) {
		return &StorageError{Op: op, Kind: StorageUnavailable, Message: err.Error()}
	}
	return &StorageError{Op: op, Kind: StorageOther, Message: err.Error()}
}
