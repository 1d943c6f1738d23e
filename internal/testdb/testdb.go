// Package testdb gives this repository's tests real databases: a new SQLite
// file per test, and a fresh PostgreSQL schema per test in the database
// named by JOBS_TEST_POSTGRES_DSN, each cleaned up when its test ends. Main
// (or AfterTests) is every test package's TestMain: it releases the pool
// that creates and drops schemas, then fails the run if a goroutine leaked.
//
// Without JOBS_TEST_POSTGRES_DSN the PostgreSQL tests skip with a message
// naming it; with JOBS_TEST_REQUIRE_POSTGRES=1, as in CI, a missing or
// unreachable PostgreSQL fails them instead.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for creating and dropping schemas

	"github.com/intentjobs/jobs"
)

// Store is a store with every capability the tests use but transactions of
// the caller's (TxStore), which memstore lacks: what the SQL stores, the
// memory store and a faultstore over any of them all are.
type Store interface {
	jobs.Store
	jobs.JobLister
	jobs.ClaimStore
	jobs.VerificationStore
	jobs.PurgeStore
}

// Environment variables read by NewPostgres.
const (
	// EnvPostgresDSN points the tests at a PostgreSQL database, e.g.
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each test gets
	// a schema of its own in it, dropped at the end.
	EnvPostgresDSN = "JOBS_TEST_POSTGRES_DSN"
	// EnvRequirePostgres, set to 1, turns a missing or unreachable PostgreSQL
	// from a skip into a failure. CI sets it.
	EnvRequirePostgres = "JOBS_TEST_REQUIRE_POSTGRES"
	// EnvLong, set to 1, runs the long tests at their full size: soaks,
	// races of many rounds, bursts of thousands of requests. Without it
	// they run smaller, so that `go test ./...` stays quick. CI sets it.
	EnvLong = "JOBS_TEST_LONG"
)

// Long reports whether the long tests run at their full size (EnvLong).
func Long() bool { return os.Getenv(EnvLong) == "1" }

// Size is full when the long tests run at their full size, quick otherwise.
func Size(full, quick int) int {
	if Long() {
		return full
	}
	return quick
}

// maxTestConns keeps parallel tests within PostgreSQL's default
// max_connections of 100.
const maxTestConns = 10

// NewSQLite opens a store on a new SQLite file in t's temporary directory,
// closed when the test ends.
func NewSQLite(t testing.TB, opts ...jobs.SQLiteOption) *jobs.SQLiteStore {
	t.Helper()
	return NewSQLiteAt(t, filepath.Join(t.TempDir(), "jobs.db"), opts...)
}

// NewSQLiteAt opens a store on the SQLite file at path, closed when the test
// ends. Several stores may share one file, as several processes would.
func NewSQLiteAt(t testing.TB, path string, opts ...jobs.SQLiteOption) *jobs.SQLiteStore {
	t.Helper()
	s, err := jobs.OpenSQLite(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("open sqlite %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// PostgresDSN returns the DSN of a fresh, empty schema in the test
// database, dropped when the test ends. It skips the test when
// JOBS_TEST_POSTGRES_DSN is not set, or fails it when
// JOBS_TEST_REQUIRE_POSTGRES=1.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgresDSN)
	if base == "" {
		if os.Getenv(EnvRequirePostgres) == "1" {
			t.Fatalf("PostgreSQL required (%s=1) but %s is not set", EnvRequirePostgres, EnvPostgresDSN)
		}
		t.Skipf("PostgreSQL tests skipped: set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run them", EnvPostgresDSN)
	}
	admin, err := adminDB(base)
	if err == nil {
		err = admin.PingContext(context.Background())
	}
	if err != nil {
		if os.Getenv(EnvRequirePostgres) == "1" {
			t.Fatalf("PostgreSQL at %s unreachable: %v", EnvPostgresDSN, err)
		}
		t.Skipf("PostgreSQL tests skipped: %s is set but unreachable: %v", EnvPostgresDSN, err)
	}
	schema := "jobs_test_" + randomHex(6)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		// The test's context may be gone; the drop must still run.
		if _, err := admin.ExecContext(context.WithoutCancel(context.Background()), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(base, schema)
}

// NewPostgres opens a store in a fresh schema (see PostgresDSN), closed and
// dropped when the test ends.
func NewPostgres(t testing.TB, opts ...jobs.PostgresOption) *jobs.PostgresStore {
	t.Helper()
	dsn := PostgresDSN(t)
	s, err := jobs.OpenPostgres(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	s.DB().SetMaxOpenConns(maxTestConns)
	t.Cleanup(func() { s.Close() }) // runs before the schema is dropped
	return s
}

// WithSearchPath returns dsn with its search_path set to schema, for URL
// and key=value DSNs alike.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}

var (
	adminOnce sync.Once
	admin     *sql.DB
	adminErr  error
)

// Cleanup releases what the package keeps between tests (the pool used to
// create and drop schemas). Call it from TestMain after m.Run, before
// checking for leaked goroutines.
func Cleanup() {
	if admin != nil {
		admin.Close()
	}
}

func adminDB(dsn string) (*sql.DB, error) {
	adminOnce.Do(func() {
		admin, adminErr = sql.Open("pgx", dsn)
		if adminErr == nil {
			admin.SetMaxOpenConns(2)
		}
	})
	return admin, adminErr
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
