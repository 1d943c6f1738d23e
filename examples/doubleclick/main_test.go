package main

import (
	"testing"

	"github.com/intentjobs/jobs/internal/testdb"
)

// The demo is part of the documentation: keep it running.
func TestDemoSQLite(t *testing.T) {
	if err := run("", ""); err != nil {
		t.Fatal(err)
	}
}

func TestDemoPostgres(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	if err := run("", dsn); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { testdb.Main(m) }
