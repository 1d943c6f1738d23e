package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// Running statements through pgx itself where the store's pool is pgx's,
// and scanning rows into types that pgx and database/sql both fill
// without a conversion of their own.

// pgHandle is where createJob runs its statements: the store's pool, a
// database/sql handle or transaction of the caller's (db), or a pgx
// transaction (tx), whichever is set.
type pgHandle struct {
	pool *sql.DB
	db   DBTX
	tx   pgx.Tx
}

// pgQueryRow runs a query that returns at most one row through h. A pgx
// row that is not there fails its Scan with pgx.ErrNoRows, which matches
// sql.ErrNoRows.
func pgQueryRow(ctx context.Context, h pgHandle, query string, args ...any) scanner {
	switch {
	case h.tx != nil:
		return h.tx.QueryRow(ctx, query, args...)
	case h.pool != nil:
		return scanFunc(func(dest ...any) error { return pgxQueryRow(ctx, h.pool, query, args, dest...) })
	}
	return h.db.QueryRowContext(ctx, query, args...)
}

// scanFunc is a scanner made of a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// pgxQueryRow runs a query that returns at most one row through pgx
// itself, on a connection of db, a pool of its "pgx" driver, rather than
// through database/sql, and scans the row into dest: pgx scans into the
// destinations directly, where database/sql first builds a decoder per
// column per query and a value per column. On a pool of another driver (a
// wrapper) it runs through database/sql.
func pgxQueryRow(ctx context.Context, db *sql.DB, query string, args []any, dest ...any) error {
	return pgxOn(ctx, db, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, query, args...).Scan(dest...)
	}, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, query, args...).Scan(dest...)
	})
}

// pgxOn runs native on a connection of db through pgx itself or, on a pool
// of another driver (a wrapper), fallback through database/sql. A
// connection that pgconn finds closed before anything was sent on it (the
// server went away while it sat in the pool) is replaced, up to twice, as
// database/sql replaces one for its own calls; one that native leaves
// closed is handed back as bad, for the pool to drop.
func pgxOn(ctx context.Context, db *sql.DB, native func(*pgx.Conn) error, fallback func(*sql.Conn) error) error {
	for try := 1; ; try++ {
		err := pgxOnce(ctx, db, native, fallback)
		if try == 3 || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			return err
		}
	}
}

// pgxOnce is one try of pgxOn, on one connection.
func pgxOnce(ctx context.Context, db *sql.DB, native func(*pgx.Conn) error, fallback func(*sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	isPgx := false
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return nil
		}
		isPgx = true
		err := native(c.Conn())
		if err != nil && c.Conn().IsClosed() {
			err = badConn{err}
		}
		return err
	})
	if isPgx {
		return err
	}
	return fallback(conn)
}

// pgReadJobByKey reads the job that holds owner's key through h, with
// query (pgJobByKey as the store runs it). No such job is sql.ErrNoRows
// (pgx's ErrNoRows matches it).
func pgReadJobByKey(ctx context.Context, h pgHandle, query, owner, key string) (Job, error) {
	var got struct {
		pgJob
		d [16]any
	}
	if err := pgQueryRow(ctx, h, query, owner, key).Scan(got.dest(got.d[:0])...); err != nil {
		return Job{}, err
	}
	return got.job(), nil
}

// pgJob receives the columns of a job (jobCols) in types that both pgx
// and database/sql scan into without converting through a value of their
// own.
type pgJob struct {
	j                         Job
	params, result            []byte
	state                     string
	attempts                  int32
	completedBy               pgtype.Text
	created, updated, closed_ pgtype.Timestamptz
}

// dest appends the destinations of the job's columns to d.
func (p *pgJob) dest(d []any) []any {
	return append(d, &p.j.ID, &p.j.Owner, &p.j.Key, &p.j.Kind, &p.j.Provider, &p.params, &p.j.Fingerprint,
		pgState{&p.state}, &p.j.Version, &p.attempts, &p.result, &p.completedBy, &p.j.Reason,
		&p.created, &p.updated, &p.closed_)
}

// job returns the job scanned.
func (p *pgJob) job() Job {
	j := p.j
	j.Params = p.params
	if p.result != nil {
		j.Result = p.result
	}
	j.State = JobState(p.state)
	j.Attempts = int(p.attempts)
	j.CompletedBy = p.completedBy.String
	j.CreatedAt, j.UpdatedAt, j.ClosedAt = pgTime(p.created), pgTime(p.updated), pgTime(p.closed_)
	return j
}

// pgText is a text argument that pgx encodes without a copy of the string
// in an interface value of its own: a pointer fits in one as it is.
type pgText struct{ s *string }

// TextValue implements pgtype.TextValuer, for pgx.
func (t pgText) TextValue() (pgtype.Text, error) { return pgtype.Text{String: *t.s, Valid: true}, nil }

// Value implements driver.Valuer, for database/sql.
func (t pgText) Value() (driver.Value, error) { return *t.s, nil }

// pgKnown scans a text column into *s, through pgx (as a BytesScanner) or
// database/sql (a Scanner), without an allocation when it holds known.
type pgKnown struct {
	s     *string
	known string
}

func (p *pgKnown) ScanBytes(b []byte) error {
	if string(b) == p.known {
		*p.s = p.known
	} else {
		*p.s = string(b)
	}
	return nil
}

func (p *pgKnown) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*p.s = v
	case []byte:
		return p.ScanBytes(v)
	default:
		return fmt.Errorf("jobs: cannot scan %T into a string", src)
	}
	return nil
}

// pgState scans a state column into *s: a known state without an
// allocation, through pgx (as a BytesScanner) or database/sql (a Scanner).
type pgState struct{ s *string }

func (p pgState) ScanBytes(b []byte) error {
	*p.s = knownState(b)
	return nil
}

func (p pgState) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*p.s = v
	case []byte:
		*p.s = knownState(v)
	default:
		return fmt.Errorf("jobs: cannot scan %T into a state", src)
	}
	return nil
}

// knownState returns b as a string, the constant of a job's or an
// attempt's state when it is one.
func knownState(b []byte) string {
	for _, s := range [...]string{
		string(JobPending), string(JobRunning), string(JobSucceeded), string(JobFailed), string(JobCancelled),
		string(AttemptStarting), string(AttemptUnknown), string(AttemptLost),
	} {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// pgTime is t in UTC, or the zero time for NULL.
func pgTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// pgTextArray is a text[] argument, sent as the array's literal
// ('{"a","b"}'), which PostgreSQL reads into the parameter's type: a
// driver that wraps pgx's through database/sql takes no slice as an
// argument, and pgx takes the literal too.
type pgTextArray []string

// Value implements driver.Valuer.
func (a pgTextArray) Value() (driver.Value, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, r := range s {
			if r == '"' || r == '\\' {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String(), nil
}
