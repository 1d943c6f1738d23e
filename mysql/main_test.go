package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"sync"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The server the tests run on: JOBS_TEST_MYSQL_DSN, a go-sql-driver/mysql
// DSN of a user that may create and drop databases, e.g.
// root@tcp(127.0.0.1:3306)/test. Without it the tests skip, unless
// JOBS_TEST_REQUIRE_MYSQL=1 (as in CI), which makes a missing or
// unreachable server a failure.
var server struct {
	once sync.Once
	dsn  string
	err  string // why there is no server
}

func serverDSN(t testing.TB) string {
	t.Helper()
	server.once.Do(func() {
		dsn := os.Getenv("JOBS_TEST_MYSQL_DSN")
		if dsn == "" {
			server.err = "JOBS_TEST_MYSQL_DSN is not set (e.g. root@tcp(127.0.0.1:3306)/test)"
			return
		}
		db, err := sql.Open("mysql", dsn)
		if err == nil {
			err = db.PingContext(context.Background())
			db.Close()
		}
		if err != nil {
			server.err = "MySQL at JOBS_TEST_MYSQL_DSN does not answer: " + err.Error()
			return
		}
		server.dsn = dsn
	})
	if server.dsn == "" {
		if os.Getenv("JOBS_TEST_REQUIRE_MYSQL") == "1" {
			t.Fatalf("JOBS_TEST_REQUIRE_MYSQL=1: %s", server.err)
		}
		t.Skip(server.err)
	}
	return server.dsn
}

// newDatabase creates a database of the test's own on the server of dsn,
// dropped when the test ends, and returns dsn naming it instead.
func newDatabase(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	name := "jobstest_" + hex.EncodeToString(b)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		// The stores close first (cleanups run last-in first-out).
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// openStore opens a store on a new database of the test's own.
func openStore(t testing.TB, opts ...mysql.Option) *mysql.Store {
	t.Helper()
	return openStoreAt(t, newDatabase(t, serverDSN(t)), opts...)
}

// openStoreAt opens another store on the database of dsn, as another
// process would.
func openStoreAt(t testing.TB, dsn string, opts ...mysql.Option) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), dsn, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.DB().SetMaxOpenConns(24)
	t.Cleanup(func() { s.Close() })
	return s
}

var _ jobs.Store = (*mysql.Store)(nil)

// release runs fn in n goroutines that all start at the same moment, and
// waits for them.
func release(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-gate
			fn(i)
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
}
