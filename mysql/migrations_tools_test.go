package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/mysql" // the mysql:// URLs of golang-migrate
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// The schema applied by the migration tools users have, as they would
// use them: version 1 first, with rows written at that version, then the
// upgrade to version 2; a store then opens with SkipMigrations, and works
// on the rows written before.
func TestMigrationTools(t *testing.T) {
	t.Parallel()
	tools := []struct {
		name  string
		apply func(t *testing.T, dsn string, to int64) int64 // up to version to; the version the tool records
	}{
		{"goose", func(t *testing.T, dsn string, to int64) int64 {
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
			if _, err := provider.UpTo(context.Background(), to); err != nil {
				t.Fatalf("goose up: %v", err)
			}
			v, err := provider.GetDBVersion(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return v
		}},
		{"golang-migrate", func(t *testing.T, dsn string, to int64) int64 {
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
			if err := m.Migrate(uint(to)); err != nil {
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
			if v := tool.apply(t, dsn, 1); v != 1 {
				t.Fatalf("%s recorded version %d; want 1", tool.name, v)
			}
			db := multiStatements(t, dsn)
			if _, err := db.Exec(`INSERT INTO intentjobs_jobs (id, owner, idempotency_key, kind, provider, params, fingerprint,
			      state, version, attempt_count, created_at, updated_at)
			    VALUES ('job_old', 'o', 'k-old', 'charge', 'acme', '{}', 'fp', 'running', 1, 1, '2025-06-01', '2025-06-01');
			  INSERT INTO intentjobs_attempts (id, job_id, seq, provider, state, base_version, provider_ref, created_at, updated_at)
			    VALUES ('att_old', 'job_old', 1, 'acme', 'unknown', 1, 'ref-old', '2025-06-01', '2025-06-01')`); err != nil {
				t.Fatal(err)
			}
			if v := tool.apply(t, dsn, int64(mysql.SchemaVersion())); v != int64(mysql.SchemaVersion()) {
				t.Fatalf("%s recorded version %d; want %d", tool.name, v, mysql.SchemaVersion())
			}
			s := openStoreAt(t, dsn, mysql.SkipMigrations())
			if v, err := s.DatabaseSchemaVersion(t.Context()); err != nil || v != mysql.SchemaVersion() {
				t.Fatalf("DatabaseSchemaVersion = %d, %v", v, err)
			}
			got, err := s.ListAttempts(t.Context(), jobs.AttemptQuery{ProviderRef: "ref-old"})
			if err != nil || len(got) != 1 || got[0].ID != "att_old" || got[0].State != jobs.AttemptUnknown {
				t.Fatalf("ListAttempts by the reference of an attempt of version 1 = %+v, %v", got, err)
			}
			if err := s.RecordLookup(t.Context(), jobs.AttemptLookup{AttemptID: "att_old", At: time.Now(), Answer: "pending"}); err != nil {
				t.Fatal(err)
			}
			m, _ := newManager(t, s)
			if _, _, err := m.Submit(t.Context(), charge("o", "k")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
