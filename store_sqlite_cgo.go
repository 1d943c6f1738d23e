//go:build cgo

package jobs

/*
int sqlite3_config(int, ...);

// jobs_sqlite_no_bulk_pcache asks SQLite to allocate no page-cache pages up
// front (SQLITE_CONFIG_PAGECACHE with no buffer and no initial pages: 7 is
// the option's number). It returns SQLite's result code: SQLITE_MISUSE (21)
// once SQLite has been initialized, when the setting can no longer change.
static int jobs_sqlite_no_bulk_pcache(void) { return sqlite3_config(7, (void*)0, 0, 0); }
*/
import "C"

import (
	"errors"

	"github.com/mattn/go-sqlite3" // registers the "sqlite3" database/sql driver
)

// sqliteDriverName is the database/sql driver OpenSQLite opens.
const sqliteDriverName = "sqlite3"

// SQLite's page caches start with one allocation of 20 pages (about 88 KB
// with 4 KB pages: SQLITE_DEFAULT_PCACHE_INITSZ), whose page headers it
// writes at once. Every page cache does, and a statement opens a page
// cache of its own for each transient table it needs: one per IN list of
// three or more values (CHECK constraints and partial index predicates
// included), one for a RETURNING clause. Such a cache lives for one
// execution of the statement, so each of those allocations is freed
// moments later, and glibc hands memory that large back to the kernel when
// it is freed; the next statement takes it again, page fault by page fault
// (about 22 for each transient table, 8 transient tables in a Complete of
// this schema). Without the initial allocation, a page cache takes pages
// one at a time as it needs them, as it does anyway beyond the first 20: a
// transient table of a few rows takes one page, from memory malloc keeps.
//
// The setting is process-wide and can only be made before SQLite is
// initialized (by the first connection opened), so it is made when the
// package is loaded. If SQLite was initialized before (another package
// opened a database in its own init), sqlite3_config refuses and nothing
// changes.
func init() { C.jobs_sqlite_no_bulk_pcache() }

// mattnCode returns the extended result code of a go-sqlite3 error.
func mattnCode(err error) (int, bool) {
	var e sqlite3.Error
	if errors.As(err, &e) {
		return int(e.ExtendedCode), true
	}
	return 0, false
}
