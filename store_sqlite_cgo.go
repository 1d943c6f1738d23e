//go:build cgo

package jobs

import (
	"errors"

	"github.com/mattn/go-sqlite3" // registers the "sqlite3" database/sql driver
)

// sqliteDriverName is the database/sql driver OpenSQLite opens.
const sqliteDriverName = "sqlite3"

// mattnCode returns the extended result code of a go-sqlite3 error.
func mattnCode(err error) (int, bool) {
	var e sqlite3.Error
	if errors.As(err, &e) {
		return int(e.ExtendedCode), true
	}
	return 0, false
}
