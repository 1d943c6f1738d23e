package jobs_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store { return testdb.NewPostgres(t) })
}

// TestPostgresThroughWrappedDriver runs the conformance suite over a pool
// whose driver wraps pgx's, as instrumentation does: the store cannot reach
// pgx's connection and runs every statement through database/sql, which
// converts the arguments and scans the columns itself.
func TestPostgresThroughWrappedDriver(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store { return newWrappedPostgres(t) })
}

// TestPostgresWithUnnamedStatements runs the conformance suite on
// connections in pgx's exec mode, the one a transaction pooler needs:
// statements are not prepared by name, and Complete runs as one statement
// rather than two sent together.
func TestPostgresWithUnnamedStatements(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips (or fails in CI) before any subtest when PostgreSQL is not configured
	jobstest.Run(t, func(t testing.TB) jobs.Store { return newUnnamedPostgres(t) })
}

// newUnnamedPostgres opens a store in a fresh schema whose connections do
// not prepare statements by name.
func newUnnamedPostgres(t testing.TB) *jobs.PostgresStore {
	t.Helper()
	dsn := testdb.PostgresDSN(t)
	switch {
	case !strings.Contains(dsn, "://"): // key=value
		dsn += " default_query_exec_mode=exec"
	case strings.Contains(dsn, "?"):
		dsn += "&default_query_exec_mode=exec"
	default:
		dsn += "?default_query_exec_mode=exec"
	}
	s, err := jobs.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	s.DB().SetMaxOpenConns(4)
	t.Cleanup(func() { s.Close() })
	return s
}

// newWrappedPostgres opens a store in a fresh schema over a pool whose
// driver wraps pgx's.
func newWrappedPostgres(t testing.TB) *jobs.PostgresStore {
	t.Helper()
	db := sql.OpenDB(wrappedConnector{testdb.PostgresDSN(t)})
	db.SetMaxOpenConns(4)
	s, err := jobs.NewPostgresStore(context.Background(), db)
	if err != nil {
		db.Close()
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		db.Close()
	})
	return s
}

// wrappedConnector opens pgx connections behind wrappedConn.
type wrappedConnector struct{ dsn string }

func (c wrappedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := stdlib.GetDefaultDriver().(driver.DriverContext).OpenConnector(c.dsn)
	if err != nil {
		return nil, err
	}
	dc, err := conn.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return wrappedConn{dc.(*stdlib.Conn)}, nil
}

func (c wrappedConnector) Driver() driver.Driver { return stdlib.GetDefaultDriver() }

// wrappedConn delegates to pgx's connection, except for the argument
// check: database/sql converts the arguments with its default converter.
type wrappedConn struct{ c *stdlib.Conn }

func (w wrappedConn) Prepare(query string) (driver.Stmt, error) { return w.c.Prepare(query) }
func (w wrappedConn) Close() error                              { return w.c.Close() }
func (w wrappedConn) Begin() (driver.Tx, error)                 { return w.c.Begin() }
func (w wrappedConn) BeginTx(ctx context.Context, o driver.TxOptions) (driver.Tx, error) {
	return w.c.BeginTx(ctx, o)
}
func (w wrappedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return w.c.PrepareContext(ctx, query)
}
func (w wrappedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return w.c.QueryContext(ctx, query, args)
}
func (w wrappedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return w.c.ExecContext(ctx, query, args)
}
func (w wrappedConn) Ping(ctx context.Context) error         { return w.c.Ping(ctx) }
func (w wrappedConn) ResetSession(ctx context.Context) error { return w.c.ResetSession(ctx) }
