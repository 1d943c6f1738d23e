package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/mysql" // the mysql:// URLs of golang-migrate
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// The schema applied by the migration tools users have, as they would
// use them; a store then opens with SkipMigrations, and works.
func TestMigrationTools(t *testing.T) {
	t.Parallel()
	tools := []struct {
		name  string
		apply func(t *testing.T, dsn string) int64 // the version the tool records
	}{
		{"goose", func(t *testing.T, dsn string) int64 {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			provider, err := goose.NewProvider(goose.DialectMySQL, db, mysql.Migrations())
			if err != nil {
				t.Fatal(err)
			}
			defer provider.Close()
			if _, err := provider.Up(context.Background()); err != nil {
				t.Fatalf("goose up: %v", err)
			}
			v, err := provider.GetDBVersion(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return v
		}},
		{"golang-migrate", func(t *testing.T, dsn string) int64 {
			fsys, err := mysql.MigrationsFor(jobs.GolangMigrate)
			if err != nil {
				t.Fatal(err)
			}
			src, err := iofs.New(fsys, ".")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := gomysql.ParseDSN(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MultiStatements = true // golang-migrate sends a file whole
			m, err := migrate.NewWithSourceInstance("iofs", src, "mysql://"+cfg.FormatDSN())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.Up(); err != nil {
				t.Fatalf("migrate up: %v", err)
			}
			v, dirty, err := m.Version()
			if err != nil || dirty {
				t.Fatalf("migrate version = %d, dirty %v, %v", v, dirty, err)
			}
			return int64(v)
		}},
	}
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			t.Parallel()
			dsn := newDatabase(t, serverDSN(t))
			if v := tool.apply(t, dsn); v != int64(mysql.SchemaVersion()) {
				t.Fatalf("%s recorded version %d; want %d", tool.name, v, mysql.SchemaVersion())
			}
			s := openStoreAt(t, dsn, mysql.SkipMigrations())
			if v, err := s.DatabaseSchemaVersion(t.Context()); err != nil || v != mysql.SchemaVersion() {
				t.Fatalf("DatabaseSchemaVersion = %d, %v", v, err)
			}
			m, _ := newManager(t, s)
			if _, _, err := m.Submit(t.Context(), charge("o", "k")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
