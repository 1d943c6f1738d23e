//go:build cgo

package compat

import (
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"

	_ "github.com/golang-migrate/migrate/v4/database/sqlite3" // golang-migrate's "sqlite3://", mattn/go-sqlite3
	_ "github.com/mattn/go-sqlite3"                           // the "sqlite3" driver, cgo
)

func init() {
	databases = append(databases, database{name: "sqlite-mattn", dialect: jobs.SQLite, goose: goose.DialectSQLite3,
		fresh: func(t *testing.T) place {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return place{driver: "sqlite3", dsn: path + "?_busy_timeout=10000&_journal_mode=WAL&_foreign_keys=on",
				migrateURL: "sqlite3://" + path}
		}})
}
