package compat

import (
	"context"
	"database/sql"
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // "pgx5://"
	_ "github.com/golang-migrate/migrate/v4/database/sqlite" // "sqlite://", modernc.org/sqlite
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/pressly/goose/v3"

	"github.com/intentjobs/jobs"
)

// migrationTool applies jobs' migrations of db's dialect to the empty
// database at p, as a user of that tool would, and returns the version the
// tool itself records.
type migrationTool struct {
	name  string
	apply func(t *testing.T, db database, p place) int64
}

var migrationTools = []migrationTool{
	{"goose", func(t *testing.T, db database, p place) int64 {
		fsys, err := jobs.Migrations(db.dialect)
		if err != nil {
			t.Fatal(err)
		}
		provider, err := goose.NewProvider(db.goose, p.open(t), fsys)
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
	{"golang-migrate", func(t *testing.T, db database, p place) int64 {
		fsys, err := jobs.MigrationsFor(db.dialect, jobs.GolangMigrate)
		if err != nil {
			t.Fatal(err)
		}
		src, err := iofs.New(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		m, err := migrate.NewWithSourceInstance("iofs", src, p.migrateURL)
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
	{"exec-each-file", func(t *testing.T, db database, p place) int64 {
		fsys, err := jobs.Migrations(db.dialect)
		if err != nil {
			t.Fatal(err)
		}
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		h := p.open(t)
		for _, name := range names { // in name order, which is version order
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.Exec(string(b)); err != nil {
				t.Fatalf("exec %s: %v", name, err)
			}
		}
		return int64(len(names))
	}},
}

// TestMigrationToolsThenSkipMigrations applies jobs' migrations with goose,
// with golang-migrate and with a plain Exec of each file, to a fresh
// PostgreSQL schema and fresh SQLite files: the tool reports the
// library's version, a store opened with SkipMigrations accepts the
// database and runs a job to completion on it, and a store that applies
// migrations finds nothing left to do.
func TestMigrationToolsThenSkipMigrations(t *testing.T) {
	t.Parallel()
	for _, tool := range migrationTools {
		for _, db := range databases {
			t.Run(tool.name+"/"+db.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				p := db.fresh(t)
				if v, want := tool.apply(t, db, p), int64(len(versions(t, db.dialect))); v != want {
					t.Errorf("%s reports version %d, want %d", tool.name, v, want)
				}

				s, err := openStore(ctx, db.dialect, p.open(t), jobs.SkipMigrations())
				if err != nil {
					t.Fatalf("open with SkipMigrations after %s: %v", tool.name, err)
				}
				applied, err := s.AppliedMigrations(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got []int
				for _, a := range applied {
					got = append(got, a.Version)
				}
				if want := versions(t, db.dialect); !slices.Equal(got, want) {
					t.Errorf("recorded versions %v, want %v", got, want)
				}
				runJob(t, s)

				// The library's own runner finds every version recorded
				// and applies nothing again.
				again, err := openStore(ctx, db.dialect, p.open(t))
				if err != nil {
					t.Fatalf("open with migrations after %s: %v", tool.name, err)
				}
				if applied2, err := again.AppliedMigrations(ctx); err != nil || !slices.Equal(applied2, applied) {
					t.Errorf("migrations after the library's runner: %v, %v; want %v unchanged", applied2, err, applied)
				}
			})
		}
	}
}

// openStore opens jobs' store of dialect over h.
func openStore(ctx context.Context, dialect jobs.Dialect, h *sql.DB, opts ...jobs.StoreOption) (jobs.SQLStore, error) {
	if dialect == jobs.Postgres {
		pg := make([]jobs.PostgresOption, len(opts))
		for i, o := range opts {
			pg[i] = o
		}
		return jobs.NewPostgresStore(ctx, h, pg...)
	}
	lite := make([]jobs.SQLiteOption, len(opts))
	for i, o := range opts {
		lite[i] = o
	}
	return jobs.NewSQLiteStore(ctx, h, lite...)
}

// versions lists the schema versions of dialect, 1 to the number of its
// migrations.
func versions(t *testing.T, dialect jobs.Dialect) []int {
	t.Helper()
	ms, err := jobs.MigrationList(dialect)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range ms {
		out = append(out, m.Version)
	}
	return out
}

// runJob submits a job on s and runs one attempt of it to success.
func runJob(t *testing.T, s jobs.Store) {
	t.Helper()
	ctx := context.Background()
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200}`)})
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatalf("StartAttempt: %v", err)
	}
	if _, err := m.MarkRunning(ctx, a.ID, "ref-1"); err != nil {
		t.Fatalf("MarkRunning: %v", err)
	}
	done, err := m.Complete(ctx, a.ID, json.RawMessage(`{"ok":true}`))
	if err != nil || done.State != jobs.JobSucceeded || done.CompletedBy != a.ID {
		t.Fatalf("Complete = %s by %s, %v", done.State, done.CompletedBy, err)
	}
}
