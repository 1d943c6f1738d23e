package perf

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// MySQLDatabase returns a database of its own on the MySQL server of
// JOBS_TEST_MYSQL_DSN, dropped when tb ends; without it tb is skipped,
// unless JOBS_TEST_REQUIRE_MYSQL=1.
func MySQLDatabase(tb testing.TB) Database {
	tb.Helper()
	dsn := os.Getenv("JOBS_TEST_MYSQL_DSN")
	if dsn == "" {
		if os.Getenv("JOBS_TEST_REQUIRE_MYSQL") == "1" {
			tb.Fatal("JOBS_TEST_REQUIRE_MYSQL=1 but JOBS_TEST_MYSQL_DSN is not set")
		}
		tb.Skip("JOBS_TEST_MYSQL_DSN is not set (e.g. root@tcp(127.0.0.1:3306)/test)")
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "perf_" + hex.EncodeToString(b)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		admin.Exec("DROP DATABASE IF EXISTS " + name)
		admin.Close()
	})
	cfg.DBName = name
	return Database{Dialect: MySQL, DSN: cfg.FormatDSN()}
}

// openMySQLContenders opens the library and both baselines on MySQL, each
// in a database of its own, closed when t ends.
func openMySQLContenders(t *testing.T) []Lifecycle {
	t.Helper()
	ctx := context.Background()
	lib, err := OpenMySQLLibrary(ctx, MySQLDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lib.Close() })
	out := []Lifecycle{lib}
	for _, style := range []CompleteStyle{CompleteInOneStatement, CompleteInTransaction} {
		b, err := OpenMySQLBaseline(ctx, MySQLDatabase(t), style)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		out = append(out, b)
	}
	return out
}

// TestMySQLWorkloadsHoldTheirInvariants runs each workload briefly for the
// MySQL store and both MySQL baselines and expects no violation.
func TestMySQLWorkloadsHoldTheirInvariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range openMySQLContenders(t) {
		if err := c.Tables().FillTo(ctx, 300); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		for _, w := range Suite() {
			if !c.Runs(w) {
				continue
			}
			w.Stored = 300
			tr, err := Prepare(ctx, w, c, 2*StormCallers)
			if err != nil {
				t.Fatalf("%s/%s: %v", w.Name, c.Name(), err)
			}
			tr.Run(ctx)
			if r := tr.Check(ctx); r.Violations != 0 {
				t.Errorf("%s/%s: %d violations: %v", w.Name, c.Name(), r.Violations, r.Problems)
			}
		}
		if c.RoundTrips() == 0 {
			t.Errorf("%s: no round trip counted", c.Name())
		}
	}
}

// TestMySQLLean runs the Submit workloads the leanest MySQL baseline
// takes part in and expects no violation; it takes no part in the others.
func TestMySQLLean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := OpenMySQLLean(ctx, MySQLDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ran := 0
	for _, w := range Suite() {
		if !l.Runs(w) {
			if !w.NeedsTables() {
				t.Errorf("%s: the leanest baseline does not run it", w.Name)
			}
			continue
		}
		ran++
		tr, err := Prepare(ctx, w, l, 2*StormCallers)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		tr.Run(ctx)
		if r := tr.Check(ctx); r.Violations != 0 {
			t.Errorf("%s: %d violations: %v", w.Name, r.Violations, r.Problems)
		}
	}
	if ran == 0 || l.RoundTrips() == 0 {
		t.Errorf("%d workloads run, %d round trips counted", ran, l.RoundTrips())
	}
	if _, _, err := l.Submit(ctx, "o", "k", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Submit(ctx, "o", "k", []byte(`{"a":2}`)); err == nil {
		t.Error("a key bound to another request was accepted")
	}
}
