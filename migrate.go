package jobs

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrationFiles embed.FS

// Dialect names the database engine of a SQL store: it chooses the schema
// that Migrations, MigrationsFor and MigrationList return.
type Dialect string

// The dialects of the SQL stores.
const (
	Postgres Dialect = "postgres" // PostgresStore
	SQLite   Dialect = "sqlite"   // SQLiteStore
)

// Migration is one numbered step of the schema.
type Migration struct {
	Version int    // 1, 2, …
	Name    string // file name, e.g. "0001_init.sql"
	SQL     string
}

// Migrations returns the schema of dialect (Postgres or SQLite) as
// numbered plain-SQL files (0001_init.sql, …), for migration tools that
// prefer to apply it themselves. Opening a store applies them too. It is
// MigrationsFor(dialect, PlainSQL).
//
// Each file records its own version in the table
// intentjobs_schema_migrations, so that a database migrated by any tool,
// or by running each file in order, opens with SkipMigrations. The files
// carry goose's annotations, which other runners read as comments.
//
// Every table, index, constraint, trigger and function of the schema is
// named intentjobs_…, so that it lives beside the application's own
// tables. On PostgreSQL, the files create them in the schema that the
// connection's search_path names first; a store opened with Schema
// applies them in its schema.
func Migrations(dialect Dialect) (fs.FS, error) {
	switch dialect {
	case Postgres, SQLite:
		return fs.Sub(migrationFiles, path.Join("migrations", string(dialect)))
	}
	return nil, invalid("dialect", "%q is none of postgres, sqlite", dialect)
}

// MigrationLayout is how MigrationsFor names the files of the schema.
type MigrationLayout int

// The layouts of MigrationsFor.
const (
	// PlainSQL names the files NNNN_name.sql, one per version, as in the
	// repository's migrations folder. goose reads them as they are (they
	// carry its annotations), and so does any runner that applies files
	// in the order of their names.
	PlainSQL MigrationLayout = iota

	// GolangMigrate names them NNNN_name.up.sql, as golang-migrate wants.
	GolangMigrate
)

// MigrationsFor returns the schema of dialect (Postgres or SQLite) as
// files named for a migration tool (see MigrationLayout), each holding the
// same SQL as in Migrations.
//
// There are no down migrations: undoing the schema would drop the jobs
// that bind idempotency keys to their outcome, after which a retried
// request is carried out again. To go back to an older release, restore a
// backup taken before the upgrade.
func MigrationsFor(dialect Dialect, layout MigrationLayout) (fs.FS, error) {
	fsys, err := Migrations(dialect)
	if err != nil {
		return nil, err
	}
	switch layout {
	case PlainSQL:
		return fsys, nil
	case GolangMigrate:
		ms, err := MigrationList(dialect)
		if err != nil {
			return nil, err
		}
		files := make(memFS, len(ms))
		for _, m := range ms {
			files[strings.TrimSuffix(m.Name, ".sql")+".up.sql"] = []byte(m.SQL)
		}
		return files, nil
	}
	return nil, invalid("layout", "%d is none of PlainSQL, GolangMigrate", layout)
}

// MigrationList returns the migrations of dialect in order.
func MigrationList(dialect Dialect) ([]Migration, error) {
	fsys, err := Migrations(dialect)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("jobs: migration %s: name must start with its number", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("jobs: migration %s: expected version %d", m.Name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this library knows. The
// dialects number their migrations alike but need not have the same
// number of them: a database is up to date at the number of its dialect's
// migrations (len(MigrationList(dialect))), which SchemaVersion is the
// largest of.
func SchemaVersion() int {
	return max(latestVersion(SQLite), latestVersion(Postgres))
}

// latestVersion is the number of dialect's migrations.
func latestVersion(dialect Dialect) int {
	ms, err := MigrationList(dialect)
	if err != nil {
		panic(err) // the embedded files are part of the build
	}
	return len(ms)
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS intentjobs_schema_migrations (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at text    NOT NULL
)`

// migrationPlan is how one store applies its dialect's migrations, in one
// transaction.
type migrationPlan struct {
	dialect Dialect // whose migrations it applies
	begin   string  // begins the transaction, with the write lock where there is one
	// setup, if not nil, runs next on the transaction's connection: it
	// waits for other openers where begin does not, and chooses where the
	// tables go.
	setup func(ctx context.Context, conn *sql.Conn) error
	// development finds a database that a development version of the
	// library created, and upgrades it.
	development developmentSchema
}

// developmentSchema is a dialect's way from the schema of the library's
// development versions, before its first release, to version 1.
//
// Those versions named their tables jobs, job_attempts, job_verifications
// and jobs_schema_migrations (and, on PostgreSQL, jobs_waiters), names
// that an application's own tables often have, and numbered their
// migrations up to 6 on PostgreSQL and 5 on SQLite. The first release
// replaced that history with one migration per dialect, 0001_init.sql,
// which creates the same schema under the library's prefix. A database
// that a development version brought to its last schema is upgraded in
// place, in the migration's transaction: its rows stay. One at an earlier
// development version is refused: the development migrations are not part
// of the library any more.
type developmentSchema struct {
	detect     string // one boolean: the database has the development version table and not this one's
	detectArgs []any
	latest     int  // the last development version, the only one upgraded
	baseline   bool // run 0001_init.sql before upgrade
	upgrade    string
}

// qDevelopmentVersion is the version a development version of the library
// recorded.
const qDevelopmentVersion = `SELECT COALESCE(MAX(version), 0) FROM jobs_schema_migrations`

// migrate applies the migrations db is missing, in one transaction under a
// lock that makes concurrent openers wait for each other. Each migration
// records itself in intentjobs_schema_migrations, so that a database
// migrated by another tool is at the same version; migrate checks that it
// did. It upgrades a database of the library's development versions (see
// developmentSchema). It refuses a database whose schema is newer than
// this library. It runs once: a dialect that can be busy retries it.
func migrate(ctx context.Context, db *sql.DB, e errorMapper, p migrationPlan) (err error) {
	ms, err := MigrationList(p.dialect)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return e.interpret("migrate", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, p.begin); err != nil {
		return e.interpret("migrate", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if p.setup != nil {
		if err := p.setup(ctx, conn); err != nil {
			return e.interpret("migrate", err)
		}
	}
	if err := upgradeDevelopment(ctx, conn, e, p.development, ms[0]); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, migrationsTable); err != nil {
		return e.interpret("migrate", err)
	}
	var current int
	if err := conn.QueryRowContext(ctx, qSchemaVersion).Scan(&current); err != nil {
		return e.interpret("migrate", err)
	}
	if current > len(ms) {
		return &StorageError{Op: "migrate", Kind: StorageSchema,
			Message: fmt.Sprintf("database schema is version %d, newer than this library's %d; upgrade the library", current, len(ms))}
	}
	for _, m := range ms[current:] {
		if _, err := conn.ExecContext(ctx, m.SQL); err != nil {
			return e.interpret("migrate "+m.Name, err)
		}
		v, err := schemaVersion(ctx, conn, e, qSchemaVersion)
		if err != nil {
			return err
		}
		if v != m.Version {
			return &StorageError{Op: "migrate " + m.Name, Kind: StorageSchema,
				Message: fmt.Sprintf("the migration left the schema at version %d instead of recording version %d", v, m.Version)}
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return e.interpret("migrate", err)
	}
	return nil
}

// upgradeDevelopment upgrades, on conn in the migration's transaction, a
// database of the library's last development schema to version 1, and
// refuses one of an earlier development schema. It does nothing to any
// other database.
func upgradeDevelopment(ctx context.Context, conn *sql.Conn, e errorMapper, d developmentSchema, baseline Migration) error {
	found, err := isDevelopment(ctx, conn, e, d)
	if err != nil || !found {
		return err
	}
	var v int
	if err := conn.QueryRowContext(ctx, qDevelopmentVersion).Scan(&v); err != nil {
		return e.interpret("migrate", err)
	}
	if v != d.latest {
		return &StorageError{Op: "migrate", Kind: StorageSchema, Message: fmt.Sprintf("the database was created by "+
			"a development version of the library, and is at its schema version %d (table jobs_schema_migrations); "+
			"this library upgrades a development database at version %d only: open it once with the last "+
			"development version of the library, which brings it to version %d, then with this one", v, d.latest, d.latest)}
	}
	if d.baseline {
		if _, err := conn.ExecContext(ctx, baseline.SQL); err != nil {
			return e.interpret("migrate "+baseline.Name, err)
		}
	}
	if _, err := conn.ExecContext(ctx, d.upgrade); err != nil {
		return e.interpret("migrate: upgrade the development schema", err)
	}
	return nil
}

// isDevelopment reports whether the database holds the schema of the
// library's development versions (and not this one's).
func isDevelopment(ctx context.Context, q DBTX, e errorMapper, d developmentSchema) (bool, error) {
	var found bool
	if err := q.QueryRowContext(ctx, d.detect, d.detectArgs...).Scan(&found); err != nil {
		return false, e.interpret("migrate", err)
	}
	return found, nil
}

const (
	qSchemaVersion     = `SELECT COALESCE(MAX(version), 0) FROM intentjobs_schema_migrations`
	qAppliedMigrations = `SELECT version, name, applied_at FROM intentjobs_schema_migrations ORDER BY version`
)

// schemaVersion reads the schema version recorded in the database with
// query (qSchemaVersion, or the same qualified by a schema): 0 if it has
// no version table, the schema never applied.
func schemaVersion(ctx context.Context, q DBTX, e errorMapper, query string) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, query).Scan(&v); err != nil {
		err = e.interpret("schema version", err)
		if se, ok := err.(*StorageError); ok && se.Kind == StorageSchema {
			return 0, nil // no version table yet
		}
		return 0, err
	}
	return v, nil
}

// AppliedMigration is a row of the schema's version table.
type AppliedMigration struct {
	Version   int    `json:"version"`
	Name      string `json:"name"`
	AppliedAt string `json:"applied_at"` // RFC 3339, as recorded
}

// appliedMigrations lists the migrations recorded in the database with
// query (qAppliedMigrations, or the same qualified by a schema).
func appliedMigrations(ctx context.Context, q DBTX, e errorMapper, query string) ([]AppliedMigration, error) {
	out, err := queryAll(ctx, q, e, "schema version", scanMigration, query)
	if se, ok := err.(*StorageError); ok && se.Kind == StorageSchema {
		return nil, nil // no version table yet
	}
	return out, err
}

func scanMigration(sc scanner) (AppliedMigration, error) {
	var m AppliedMigration
	err := sc.Scan(&m.Version, &m.Name, &m.AppliedAt)
	return m, err
}

// checkSchema is what opening a store does about the schema once the
// options are read: nothing (InspectOnly), apply the missing migrations
// (the default), or only check that the database is at this library's
// version (SkipMigrations).
func checkSchema(ctx context.Context, s SQLStore, cfg storeConfig, dev developmentSchema, apply func(context.Context) error) error {
	switch {
	case cfg.inspectOnly:
		return nil
	case !cfg.skipMigrations:
		return apply(ctx)
	}
	v, err := s.DatabaseSchemaVersion(ctx)
	if err != nil {
		return err
	}
	want := latestVersion(s.Dialect())
	if v == 0 {
		e, _ := s.(errorMapper)
		if dev, err := isDevelopment(ctx, s.DB(), e, dev); err != nil || dev {
			if err != nil {
				return err
			}
			return &StorageError{Op: "open", Kind: StorageSchema,
				Message: "the database was created by a development version of the library (SkipMigrations leaves " +
					"the schema to you): open the store once without SkipMigrations, or run `jobsctl migrate`, " +
					"to upgrade it"}
		}
	}
	switch {
	case v == 0:
		return &StorageError{Op: "open", Kind: StorageSchema,
			Message: fmt.Sprintf("the database has no jobs schema (SkipMigrations leaves it to you): apply the "+
				"migrations of version 1 to %d with your migration tool (jobs.Migrations) or `jobsctl migrate`, "+
				"or open the store without SkipMigrations to apply them", want)}
	case v != want:
		return &StorageError{Op: "open", Kind: StorageSchema,
			Message: fmt.Sprintf("database schema is version %d; this library needs %d", v, want)}
	}
	return nil
}

// memFS is a read-only file system of a few files in one directory, held in
// memory: file name to content. MigrationsFor serves renamed migrations
// with it.
type memFS map[string][]byte

var (
	_ fs.ReadDirFS  = memFS(nil)
	_ fs.ReadFileFS = memFS(nil)
)

// Open implements fs.FS.
func (m memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		entries, _ := m.ReadDir(".")
		return &memDir{info: memInfo{name: ".", dir: true}, entries: entries}, nil
	}
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{Reader: bytes.NewReader(b), info: memInfo{name: name, size: int64(len(b))}}, nil
}

// ReadFile implements fs.ReadFileFS.
func (m memFS) ReadFile(name string) ([]byte, error) {
	b, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(b), nil // the caller may change it
}

// ReadDir implements fs.ReadDirFS: the files in name order.
func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	entries := make([]fs.DirEntry, 0, len(m))
	for n, b := range m {
		entries = append(entries, fs.FileInfoToDirEntry(memInfo{name: n, size: int64(len(b))}))
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// memInfo describes a file of a memFS, or its directory.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// memFile is an open file of a memFS.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memDir is the open directory of a memFS.
type memDir struct {
	info    memInfo
	entries []fs.DirEntry // not yet read
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }

func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.entries))
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
