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
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/mattn/go-sqlite3" // registers the "sqlite3" database/sql driver
)

// sqliteDriverName is the database/sql driver OpenSQLite opens.
const sqliteDriverName = "sqlite3"

// SQLite's page caches start with one allocation of
// SQLITE_DEFAULT_PCACHE_INITSZ pages, whose page headers it writes at
// once. Every page cache does, and a statement opens a page cache of its
// own for each transient table it needs: one per IN list of three or more
// values (CHECK constraints and partial index predicates included), one
// for a RETURNING clause. Such a cache lives for one execution of the
// statement, so each of those allocations is freed moments later, and
// glibc hands memory that large back to the kernel when it is freed; the
// next statement takes it again, page fault by page fault, and a Complete
// needs several transient tables. Without the initial allocation, a page
// cache takes pages one at a time as it needs them, as it does anyway
// beyond the initial ones: a transient table of a few rows takes one page,
// from memory malloc keeps.
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

// sqliteStatements runs fn on conn's connection: on go-sqlite3's
// connection itself when conn is one (see mattnStatements), and through
// database/sql otherwise.
func sqliteStatements(conn *sql.Conn, fn func(sqliteConnStatements) error) error {
	used := false
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return nil
		}
		used = true
		return fn(&mattnStatements{c: c})
	})
	if used {
		return err
	}
	return fn(connStatements{conn})
}

// mattnStatements runs statements on go-sqlite3's connection without
// database/sql in between, as PostgreSQL's hot statements run on pgx's
// (pgxQueryRow): database/sql wraps every statement in objects of its own
// (the arguments converted into a new slice, a Rows, a Row, the result of
// an Exec) and copies every value it scans, several allocations a
// statement, where the driver's own values can be taken as they are.
// Arguments are converted as database/sql converts them (named), and a
// row read must be scanned before the next statement runs: its values live
// in the struct.
type mattnStatements struct {
	c    *sqlite3.SQLiteConn
	args [16]driver.NamedValue
	vals [24]driver.Value
}

// named turns args into the driver's arguments, converted as database/sql
// converts them (an int to an int64, say) where they are not values the
// driver takes as they are.
func (m *mattnStatements) named(args []any) ([]driver.NamedValue, error) {
	nv := m.args[:0]
	for i, a := range args {
		if !driver.IsValue(a) {
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return nil, fmt.Errorf("jobs: argument %d: %w", i+1, err)
			}
			a = v
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return nv, nil
}

func (m *mattnStatements) exec(ctx context.Context, query string, args ...any) (int64, error) {
	nv, err := m.named(args)
	if err != nil {
		return 0, err
	}
	res, err := m.c.ExecContext(ctx, query, nv)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (m *mattnStatements) autocommit() (on, known bool) { return m.c.AutoCommit(), true }

func (m *mattnStatements) queryRow(ctx context.Context, query string, args ...any) scanner {
	return m.row(ctx, query, args, false)
}

func (m *mattnStatements) writeRow(ctx context.Context, query string, args ...any) scanner {
	return m.row(ctx, query, args, true)
}

// row runs query and returns its first row; toEnd steps the statement on
// to its end before it is reset.
func (m *mattnStatements) row(ctx context.Context, query string, args []any, toEnd bool) scanner {
	nv, err := m.named(args)
	if err != nil {
		return errRow{err}
	}
	rows, err := m.c.QueryContext(ctx, query, nv)
	if err != nil {
		return errRow{err}
	}
	defer rows.Close()
	n := len(rows.Columns())
	if n > len(m.vals) {
		return errRow{fmt.Errorf("jobs: %d columns, more than %d", n, len(m.vals))}
	}
	vals := m.vals[:n]
	if err := rows.Next(vals); err == io.EOF {
		return errRow{sql.ErrNoRows}
	} else if err != nil {
		return errRow{err}
	}
	for toEnd {
		// Any further row is stepped over, not read: the driver fills
		// no values when it is given no room for them.
		if err := rows.Next(nil); err == io.EOF {
			break
		} else if err != nil {
			return errRow{err}
		}
	}
	return valuesRow(vals)
}
