package compat

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver, pure Go
)

// database is a kind of database that jobs runs on, reached through one
// database/sql driver.
type database struct {
	name    string        // e.g. "sqlite-modernc"
	dialect jobs.Dialect  // jobs' dialect
	goose   goose.Dialect // goose's name for it
	// fresh makes an empty database for t, removed when t ends, and says
	// how to reach it: a database/sql driver and DSN, and the URL by which
	// golang-migrate reaches it.
	fresh func(t *testing.T) place
}

// place is where one fresh database is.
type place struct {
	driver, dsn string
	migrateURL  string
}

// open returns a new handle on the database at p, closed when t ends.
func (p place) open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open(p.driver, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// databases lists the databases of this build: PostgreSQL through pgx and
// SQLite through modernc.org/sqlite always, and SQLite through
// mattn/go-sqlite3 where cgo is on (databases_cgo_test.go).
var databases = []database{
	{name: "postgres-pgx", dialect: jobs.Postgres, goose: goose.DialectPostgres, fresh: func(t *testing.T) place {
		dsn := postgresSchema(t)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Scheme = "pgx5" // golang-migrate's pgx/v5 driver
		return place{driver: "pgx", dsn: dsn, migrateURL: u.String()}
	}},
	{name: "sqlite-modernc", dialect: jobs.SQLite, goose: goose.DialectSQLite3, fresh: func(t *testing.T) place {
		path := filepath.Join(t.TempDir(), "jobs.db")
		return place{driver: "sqlite", dsn: moderncDSN(path), migrateURL: "sqlite://" + path}
	}},
}

// moderncDSN opens the SQLite file at path with modernc.org/sqlite as
// jobs.NewSQLiteStore wants it: WAL for concurrent readers, a busy timeout
// for concurrent writers, foreign keys, and transactions of the caller's
// that take the write lock when they begin.
func moderncDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"
}

// Environment variables, as in the root module's tests.
const (
	envPostgresDSN     = "JOBS_TEST_POSTGRES_DSN"
	envRequirePostgres = "JOBS_TEST_REQUIRE_POSTGRES"
)

var (
	adminOnce sync.Once
	admin     *sql.DB
	adminErr  error
)

func closeAdmin() {
	if admin != nil {
		admin.Close()
	}
}

// postgresSchema returns the URL DSN of a new, empty schema in the test
// database, dropped when t ends. Without JOBS_TEST_POSTGRES_DSN it skips t,
// or fails it when JOBS_TEST_REQUIRE_POSTGRES=1.
func postgresSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv(envPostgresDSN)
	if base == "" {
		if os.Getenv(envRequirePostgres) == "1" {
			t.Fatalf("PostgreSQL required (%s=1) but %s is not set", envRequirePostgres, envPostgresDSN)
		}
		t.Skipf("PostgreSQL tests skipped: set %s, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable", envPostgresDSN)
	}
	adminOnce.Do(func() {
		if admin, adminErr = sql.Open("pgx", base); adminErr == nil {
			admin.SetMaxOpenConns(2)
			adminErr = admin.Ping()
		}
	})
	if adminErr != nil {
		t.Fatalf("PostgreSQL at %s: %v", envPostgresDSN, adminErr)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "jobs_compat_" + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s must be a URL here: %v", envPostgresDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
