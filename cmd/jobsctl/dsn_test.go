package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// JOBS_DSN takes every form --postgres takes, and SQLite as sqlite:PATH or
// a plain file path; anything else is refused before a connection is tried.
func TestJOBSDSNAcceptsWhatTheFlagsAccept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	testdb.NewSQLiteAt(t, path)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	up, err := filepath.Rel(cwd, path)
	if err != nil || !strings.HasPrefix(up, "../") {
		t.Fatalf("no ../ path from %s to %s: %q, %v", cwd, path, up, err)
	}
	pgURL := testdb.PostgresDSN(t) // a schema of its own, by search_path
	pg, err := jobs.OpenPostgres(context.Background(), pgURL)
	if err != nil {
		t.Fatal(err)
	}
	pg.Close()

	cases := []struct {
		name string
		dsn  string
		dir  string // where jobsctl runs
		code int
		out  string // on stdout, or on stderr when code is 2
	}{
		{"postgres URL", pgURL, "", 0, "database  postgres"},
		{"postgresql URL", "postgresql://" + strings.TrimPrefix(pgURL, "postgres://"), "", 0, "database  postgres"},
		{"key=value", keyValue(t, pgURL), "", 0, "database  postgres"},
		{"key = value, spaced", strings.ReplaceAll(keyValue(t, pgURL), "=", " = "), "", 0, "database  postgres"},
		{"sqlite:PATH", "sqlite:" + path, "", 0, "database  sqlite"},
		{"absolute path", path, "", 0, "database  sqlite"},
		{"./ path", "./jobs.db", dir, 0, "database  sqlite"},
		{"../ path", up, "", 0, "database  sqlite"},
		{"other scheme", "mysql://root@127.0.0.1/jobs", "", 2, "JOBS_DSN must be a postgres:// or postgresql:// URL, key=value pairs"},
		{"bare file name", "jobs.db", dir, 2, "JOBS_DSN must be"},
		{"sqlite: without a path", "sqlite:", "", 2, "no SQLite database path given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := jobsctlIn(t, tc.dir, []string{"JOBS_DSN=" + tc.dsn}, "schema")
			if tc.code == 2 {
				r.wantError(t, 2, tc.out)
				return
			}
			// Up to date only if jobsctl reached the very database, and
			// on PostgreSQL the schema that search_path names.
			r.want(t, tc.code, tc.out, "up to date")
		})
	}
}

// keyValue turns a postgres:// URL into the key=value form of the same
// connection string.
func keyValue(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	kv := []string{"host=" + u.Hostname(), "dbname=" + strings.TrimPrefix(u.Path, "/"), "user=" + u.User.Username()}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if p, ok := u.User.Password(); ok {
		kv = append(kv, "password="+p)
	}
	for k, vs := range u.Query() {
		kv = append(kv, k+"="+vs[0])
	}
	return strings.Join(kv, " ")
}
