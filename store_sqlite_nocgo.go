//go:build !cgo

package jobs

import "database/sql"

// Without cgo there is no go-sqlite3: OpenSQLite refuses, and
// NewSQLiteStore serves databases opened with a pure-Go driver.
const sqliteDriverName = ""

func mattnCode(error) (int, bool) { return 0, false }

// sqliteStatements runs fn on conn through database/sql.
func sqliteStatements(conn *sql.Conn, fn func(sqliteConnStatements) error) error {
	return fn(connStatements{conn})
}
