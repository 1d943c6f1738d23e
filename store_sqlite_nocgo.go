//go:build !cgo

package jobs

// Without cgo there is no go-sqlite3: OpenSQLite refuses, and
// NewSQLiteStore serves databases opened with a pure-Go driver.
const sqliteDriverName = ""

func mattnCode(error) (int, bool) { return 0, false }
