//go:build !cgo

package jobs

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// The SQLite store needs cgo (github.com/mattn/go-sqlite3). Without it these
// constructors exist, so that code using them still compiles, and fail.

func errNoCgo() error {
	return &StorageError{Op: "open sqlite", Kind: StorageUnavailable,
		Message: "the SQLite store needs cgo: build with CGO_ENABLED=1 and a C compiler"}
}

// OpenSQLite needs cgo; built without it, it returns an error.
func OpenSQLite(ctx context.Context, dsn string, opts ...StoreOption) (*SQLStore, error) {
	return nil, errNoCgo()
}

// NewSQLiteStore needs cgo; built without it, it returns an error.
func NewSQLiteStore(ctx context.Context, db *sql.DB, opts ...StoreOption) (*SQLStore, error) {
	return nil, errNoCgo()
}

// NewSQLiteStoreSQLX needs cgo; built without it, it returns an error.
func NewSQLiteStoreSQLX(ctx context.Context, db *sqlx.DB, opts ...StoreOption) (*SQLStore, error) {
	return nil, errNoCgo()
}
