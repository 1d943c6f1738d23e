package main

import (
	"testing"

	"github.com/intentjobs/jobs/jobstest"
)

// The demo is part of the documentation: keep it running.
func TestDemoSQLite(t *testing.T) {
	if err := run("", ""); err != nil {
		t.Fatal(err)
	}
}

func TestDemoPostgres(t *testing.T) {
	dsn := jobstest.PostgresDSN(t)
	if err := run("", dsn); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) { jobstest.Main(m) }
