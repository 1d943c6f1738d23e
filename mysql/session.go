package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/intentjobs/jobs"
)

// The sessions of a store that Open opened. Each connection runs
// sessionSetup when it is made, before the pool hands it out:
//   - strict mode, added to whatever sql_mode the server or the DSN gave
//     (so that an application's ANSI_QUOTES, say, stays; the statements
//     quote strings with single quotes alone), so that a value too long
//     for its column is refused rather than cut;
//   - READ COMMITTED: every statement of a transaction reads the latest
//     committed rows, and InnoDB takes no gap locks, which under
//     REPEATABLE READ make writers of neighbouring jobs wait for each
//     other. The store is correct under REPEATABLE READ too (a store made
//     by New over the application's *sql.DB may run under it): each
//     transaction first locks the rows it decides on, and reads nothing
//     before;
//   - UTC, for the few times the server itself formats
//     (intentjobs_schema_migrations.applied_at);
//   - on Galera, wsrep_sync_wait=1: a read, and the start of each
//     transaction, waits until the node has applied every commit the
//     cluster made before, so that a job submitted through one node is
//     found through another at once.
var sessionSetup = []string{
	`SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES')`,
	`SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`,
	`SET SESSION time_zone = '+00:00'`,
}

const galeraSessionSetup = `SET SESSION wsrep_sync_wait = 1`

// sessionConnector makes the connections of a store that Open opened: the
// driver's, each set up with sessionSetup.
type sessionConnector struct {
	driver.Connector
	setup []string
}

func (c *sessionConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("jobs/mysql: the driver's connection %T cannot execute statements", conn)
	}
	for _, stmt := range c.setup {
		if _, err := ex.ExecContext(ctx, stmt, nil); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// openDB opens the pool of a store that Open opened, from dsn: a
// go-sql-driver/mysql DSN (user:password@tcp(host:3306)/database?params).
// Whatever the DSN says, the store's connections parse times (parseTime),
// in UTC (loc), and interpolate arguments on the client (one round trip
// per statement instead of a prepare, an execute and a close). It asks
// the server whether it is a Galera node first.
func openDB(ctx context.Context, dsn string) (*sql.DB, *server, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, &jobs.InputError{Field: "dsn", Problem: err.Error()}
	}
	if cfg.DBName == "" {
		return nil, nil, &jobs.InputError{Field: "dsn", Problem: "names no database (user@tcp(host:3306)/database)"}
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	inner, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, &jobs.InputError{Field: "dsn", Problem: err.Error()}
	}
	probe := sql.OpenDB(&sessionConnector{Connector: inner, setup: sessionSetup})
	srv, err := readServer(ctx, probe)
	probe.Close()
	if err != nil {
		return nil, nil, err
	}
	setup := sessionSetup
	if srv.galera {
		setup = append(setup[:len(setup):len(setup)], galeraSessionSetup)
	}
	return sql.OpenDB(&sessionConnector{Connector: inner, setup: setup}), srv, nil
}

// server is what the store knows of the server it opened on.
type server struct {
	version string // VERSION(), e.g. "10.11.6-MariaDB" or "8.0.36"
	mariadb bool
	galera  bool // a Galera node (wsrep_on)
	sqlMode string
}

// readServer asks the server what it is, and checks that the session is
// strict.
func readServer(ctx context.Context, db *sql.DB) (*server, error) {
	var srv server
	err := db.QueryRowContext(ctx, `SELECT VERSION(), @@SESSION.sql_mode`).Scan(&srv.version, &srv.sqlMode)
	if err != nil {
		return nil, interpret("open mysql", err)
	}
	srv.mariadb = strings.Contains(strings.ToLower(srv.version), "mariadb")
	// wsrep_on exists only where the server was built with Galera; MySQL
	// has no such variable, and the query then finds no row.
	var name, value string
	err = db.QueryRowContext(ctx, `SHOW VARIABLES LIKE 'wsrep_on'`).Scan(&name, &value)
	switch {
	case err == nil:
		srv.galera = strings.EqualFold(value, "ON")
	case err != sql.ErrNoRows:
		return nil, interpret("open mysql", err)
	}
	if !strictMode(srv.sqlMode) {
		return nil, fmt.Errorf("jobs/mysql: sql_mode is %q: add STRICT_TRANS_TABLES or STRICT_ALL_TABLES "+
			"(the DSN parameter sql_mode, or the server's setting), or open the store with Open, which sets it: %w",
			srv.sqlMode, ErrNotStrict)
	}
	return &srv, nil
}

// strictMode reports whether an sql_mode refuses values that do not fit
// their columns instead of adjusting them.
func strictMode(mode string) bool {
	for _, m := range strings.Split(strings.ToUpper(mode), ",") {
		if m == "STRICT_TRANS_TABLES" || m == "STRICT_ALL_TABLES" {
			return true
		}
	}
	return false
}
