package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
)

// Running statements on the writer connection: through database/sql
// (connStatements), or on go-sqlite3's connection itself (mattnStatements,
// store_sqlite_cgo.go), which costs fewer allocations.

// sqliteConnStatements runs the statements of a transaction on the writer
// connection (sqliteStatements).
type sqliteConnStatements interface {
	// exec runs a statement and returns the number of rows it changed.
	exec(ctx context.Context, query string, args ...any) (int64, error)
	// queryRow runs a query and returns its first row, whose Scan returns
	// sql.ErrNoRows if it has none.
	queryRow(ctx context.Context, query string, args ...any) scanner
	// writeRow is queryRow for a write that returns its row, run to its
	// end (see returning).
	writeRow(ctx context.Context, query string, args ...any) scanner
	// autocommit reports whether the connection is outside a transaction,
	// if it can tell (known).
	autocommit() (on, known bool)
}

// connStatements runs statements through database/sql.
type connStatements struct{ c *sql.Conn }

func (s connStatements) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(ctx, s.c, query, args...)
}

func (s connStatements) queryRow(ctx context.Context, query string, args ...any) scanner {
	return s.c.QueryRowContext(ctx, query, args...)
}

func (s connStatements) writeRow(ctx context.Context, query string, args ...any) scanner {
	rows, err := s.c.QueryContext(ctx, query, args...)
	if err != nil {
		return errRow{err}
	}
	return finishedRow{rows}
}

func (connStatements) autocommit() (on, known bool) { return false, false }

// finishedRow is the first row of rows, which its Scan reads to their end.
type finishedRow struct{ rows *sql.Rows }

func (r finishedRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	for r.rows.Next() { // to the statement's end, where SQLite checkpoints
	}
	return r.rows.Err()
}

// valuesRow is a row of a driver's values, scanned as database/sql would
// scan them into the types the store reads (a driver.Value is nil, int64,
// float64, bool, []byte, string or time.Time). A []byte destination gets a
// copy; the values are not kept.
type valuesRow []driver.Value

func (r valuesRow) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("jobs: %d columns scanned into %d destinations", len(r), len(dest))
	}
	for i, d := range dest {
		if err := assignValue(d, r[i]); err != nil {
			return fmt.Errorf("jobs: column %d: %w", i, err)
		}
	}
	return nil
}

func assignValue(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(v)
	case *string:
		if s, ok := v.(string); ok {
			*d = s
			return nil
		}
	case *JobState:
		if s, ok := v.(string); ok {
			*d = JobState(s)
			return nil
		}
	case *AttemptState:
		if s, ok := v.(string); ok {
			*d = AttemptState(s)
			return nil
		}
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
	case *int:
		if n, ok := v.(int64); ok {
			*d = int(n)
			return nil
		}
	case *bool:
		switch b := v.(type) {
		case bool:
			*d = b
			return nil
		case int64:
			*d = b != 0
			return nil
		}
	case *[]byte:
		switch b := v.(type) {
		case nil:
			*d = nil
			return nil
		case string:
			*d = []byte(b)
			return nil
		case []byte:
			*d = slices.Clone(b)
			return nil
		}
	}
	return fmt.Errorf("cannot scan %T into %T", v, dest)
}
