package perf

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intentjobs/jobs"
)

// Lean is the leanest hand-written Submit: what an engineer who owns the
// schema writes when Submit is all there is to it. On SQLite the job's ID
// is the table's rowid (INTEGER PRIMARY KEY, no index of its own), on
// PostgreSQL a bigint identity; the request's hash is 32 raw bytes; the
// table has only the columns Submit reads or writes (id, owner,
// idempotency_key, params, request_hash) and the unique index on (owner,
// idempotency_key). Submit is INSERT … ON CONFLICT DO NOTHING RETURNING id,
// and a SELECT of the stored hash on a duplicate, as Baseline's.
//
// With Features, it adds one or more of the library's choices to that
// schema or code, each alone, so that a report prices each (LeanFeature).
// It runs only the Submit workloads that need no prefilled tables (new keys,
// storms, replays); with Features, only those of ablation workloads.
type Lean struct {
	dialect  string
	features LeanFeature
	name     string
	w, r     *sql.DB
	trips    atomic.Int64
	insert   string
	byKey    string
	lock     *os.File // FileLock: the lock file
	lockMu   sync.Mutex
}

// LeanFeature is one of the library's choices added to Lean.
type LeanFeature uint

// The choices. Each is what the library does and Lean does not.
const (
	// TextID: the job's ID is a string made in Go ("job_" and 32 hex
	// digits, time first), the table's primary key: on SQLite a unique
	// index of its own beside the rowid, on PostgreSQL a text key.
	TextID LeanFeature = 1 << iota
	// HexHash: the request's hash is stored as 64 hex digits, not 32 bytes.
	HexHash
	// KindProvider: the job stores its kind and provider, two more text
	// columns.
	KindProvider
	// Lifecycle: the job has the columns a lifecycle needs (state, version,
	// attempt_count, result, completed_by, reason, created_at, updated_at,
	// closed_at), set by the insert.
	LifecycleCols
	// Checks: the library's CHECK constraints on those columns, and
	// json_valid(params) on SQLite (Lifecycle's columns come with them).
	Checks
	// Canonical: the params are put in canonical form (jobs.Canonicalize)
	// before they are hashed and stored.
	Canonical
	// FileLock: every write takes an exclusive flock(2) on a file beside the
	// database and releases it after, as the library's writers queue with
	// other processes' (SQLite only).
	FileLock
	// WholeJob: the insert returns every column of the row, and a
	// duplicate reads every column, as the library returns the whole job.
	WholeJob
)

// LeanFeatures are the choices a report prices one by one, by name.
var LeanFeatures = []struct {
	Feature LeanFeature
	Name    string // the contender's name suffix
	Title   string
}{
	{TextID, "text-id", "string job IDs as the primary key (on SQLite a unique index beside the rowid)"},
	{HexHash, "hex-hash", "the request's hash as 64 hex digits instead of 32 bytes"},
	{KindProvider, "kind-provider", "kind and provider stored with the job"},
	{LifecycleCols, "lifecycle-cols", "the lifecycle's columns (state, version, result, times …) written by the insert"},
	{Checks, "checks", "CHECK constraints on them (state, winner, closed; json_valid on SQLite)"},
	{Canonical, "canonical", "the params in canonical form (jobs.Canonicalize) before hashing and storing"},
	{FileLock, "file-lock", "an exclusive flock(2) on a file beside the database around every write (SQLite)"},
	{WholeJob, "whole-job", "the whole row returned by the insert, and read on a duplicate"},
}

// leanTable builds the jobs table of Lean with features.
func leanTable(dialect string, f LeanFeature) string {
	var cols []string
	id, text, blob, json, integer, ts := "id INTEGER PRIMARY KEY", "TEXT", "BLOB", "TEXT", "INTEGER", "INTEGER"
	if dialect == Postgres {
		id, text, blob, json, integer, ts = "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "text", "bytea", "json", "bigint", "timestamptz"
	}
	if f&TextID != 0 {
		id = "id " + text + " PRIMARY KEY"
	}
	cols = append(cols, id,
		"owner "+text+" NOT NULL",
		"idempotency_key "+text+" NOT NULL")
	if f&KindProvider != 0 {
		cols = append(cols, "kind "+text+" NOT NULL", "provider "+text+" NOT NULL")
	}
	params := "params " + json + " NOT NULL"
	if f&Checks != 0 && dialect == SQLite {
		params += " CHECK (json_valid(params))"
	}
	cols = append(cols, params)
	if f&HexHash != 0 {
		cols = append(cols, "request_hash "+text+" NOT NULL")
	} else {
		cols = append(cols, "request_hash "+blob+" NOT NULL")
	}
	if f&(LifecycleCols|Checks) != 0 {
		completedBy := integer
		if f&TextID != 0 {
			completedBy = text
		}
		cols = append(cols, "state "+text+" NOT NULL", "version "+integer+" NOT NULL",
			"attempt_count "+integer+" NOT NULL DEFAULT 0", "result "+json, "completed_by "+completedBy,
			"reason "+text+" NOT NULL DEFAULT ''", "created_at "+ts+" NOT NULL", "updated_at "+ts+" NOT NULL", "closed_at "+ts)
	}
	cols = append(cols, "UNIQUE (owner, idempotency_key)")
	if f&Checks != 0 {
		if dialect == SQLite {
			cols = append(cols,
				"CHECK (state = 'pending' OR state = 'running' OR state = 'succeeded' OR state = 'failed' OR state = 'cancelled')",
				"CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL))",
				"CHECK ((state = 'succeeded' OR state = 'failed' OR state = 'cancelled') = (closed_at IS NOT NULL))")
		} else {
			cols = append(cols,
				"CHECK (state = ANY ('{pending,running,succeeded,failed,cancelled}'::text[]))",
				"CHECK ((state = 'succeeded') = (completed_by IS NOT NULL AND result IS NOT NULL))",
				"CHECK ((state = ANY ('{succeeded,failed,cancelled}'::text[])) = (closed_at IS NOT NULL))")
		}
	}
	strict := ""
	if dialect == SQLite {
		strict = " STRICT"
	}
	return "CREATE TABLE IF NOT EXISTS lean_jobs (\n    " + strings.Join(cols, ",\n    ") + "\n)" + strict
}

// leanStatements builds Lean's insert and its read by key.
func leanStatements(dialect string, f LeanFeature) (insert, byKey string) {
	cols, vals := []string{"owner", "idempotency_key"}, []string{"$1", "$2"}
	now := "$5"
	if f&TextID != 0 {
		cols, vals, now = append([]string{"id"}, cols...), append([]string{"$5"}, vals...), "$6"
	}
	if f&KindProvider != 0 {
		cols, vals = append(cols, "kind", "provider"), append(vals, "'charge'", "'psp'")
	}
	cols, vals = append(cols, "params", "request_hash"), append(vals, "$3", "$4")
	if f&(LifecycleCols|Checks) != 0 {
		cols, vals = append(cols, "state", "version", "created_at", "updated_at"), append(vals, "'pending'", "1", now, now)
	}
	returning := "id"
	if f&WholeJob != 0 {
		returning = "*"
	}
	insert = "INSERT INTO lean_jobs (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(vals, ", ") +
		") ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING " + returning
	byKey = "SELECT " + returning + ", request_hash FROM lean_jobs WHERE owner = $1 AND idempotency_key = $2"
	return rebind(dialect, insert), rebind(dialect, byKey)
}

// OpenLean creates Lean's table on db and returns it with features; 0 is
// the leanest baseline, "sql-lean".
func OpenLean(ctx context.Context, db Database, features LeanFeature) (*Lean, error) {
	if err := db.validate(); err != nil {
		return nil, err
	}
	l := &Lean{dialect: db.Dialect, features: features, name: "sql-lean"}
	for _, f := range LeanFeatures {
		if features&f.Feature != 0 {
			l.name += "+" + f.Name
		}
	}
	switch db.Dialect {
	case Postgres:
		if features&FileLock != 0 {
			return nil, fmt.Errorf("lean: the file lock is SQLite's")
		}
		pool, err := openPostgres(db.DSN, &l.trips)
		if err != nil {
			return nil, err
		}
		l.w, l.r = pool, pool
	case SQLite:
		var err error
		if l.w, err = openSQLiteWriter(ctx, db.DSN, db.Synchronous); err != nil {
			return nil, err
		}
		if l.r, err = openSQLiteReader(db.DSN, db.Synchronous); err != nil {
			l.Close()
			return nil, err
		}
		if features&FileLock != 0 {
			if l.lock, err = os.OpenFile(db.DSN+"-lock", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
				l.Close()
				return nil, err
			}
		}
	}
	if _, err := l.w.ExecContext(ctx, leanTable(db.Dialect, features)); err != nil {
		l.Close()
		return nil, fmt.Errorf("lean schema: %w", err)
	}
	l.insert, l.byKey = leanStatements(db.Dialect, features)
	return l, nil
}

// Name implements Contender: "sql-lean", followed by "+feature" for each
// feature added.
func (l *Lean) Name() string { return l.name }

// Runs implements Contender: the Submit workloads without prefilled
// tables; with features, only the ablation workloads.
func (l *Lean) Runs(w Workload) bool {
	if w.NeedsTables() {
		return false
	}
	return l.features == 0 || w.Ablation
}

// leanHash is Baseline's request hash, as 32 bytes.
func leanHash(params []byte) []byte {
	h := sha256.New()
	h.Write([]byte("charge\x00psp\x00"))
	h.Write(params)
	return h.Sum(make([]byte, 0, sha256.Size))
}

// Submit implements Contender.
func (l *Lean) Submit(ctx context.Context, owner, key string, params json.RawMessage) (string, bool, error) {
	if l.features&Canonical != 0 {
		canon, err := jobs.Canonicalize(params)
		if err != nil {
			return "", false, err
		}
		params = canon
	}
	var hash any = leanHash(params)
	if l.features&HexHash != 0 {
		hash = hex.EncodeToString(hash.([]byte))
	}
	args := []any{owner, key, string(params), hash}
	if l.features&TextID != 0 {
		args = append(args, newID("job_"))
	}
	if l.features&(LifecycleCols|Checks) != 0 {
		args = append(args, leanNow(l.dialect))
	}
	if l.lock != nil {
		// One writer of the process at a time holds the file lock, as the
		// library's write queue lets one goroutine take it.
		l.lockMu.Lock()
		err := flock(l.lock, syscall.LOCK_EX)
		if err != nil {
			l.lockMu.Unlock()
			return "", false, err
		}
		defer func() {
			flock(l.lock, syscall.LOCK_UN)
			l.lockMu.Unlock()
		}()
	}
	id, err := l.insertRow(ctx, args)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	stored, err := l.readByKey(ctx, owner, key, &id)
	if err != nil {
		return "", false, err
	}
	if !sameHash(stored, hash) {
		return "", false, fmt.Errorf("key %q is bound to another request", key)
	}
	return id, false, nil
}

func sameHash(stored, hash any) bool {
	switch h := hash.(type) {
	case string:
		return stored == h
	case []byte:
		s, ok := stored.([]byte)
		return ok && string(s) == string(h)
	}
	return false
}

// leanNow is the time the lifecycle columns are written with.
func leanNow(dialect string) any {
	if dialect == Postgres {
		return time.Now()
	}
	return time.Now().UnixMicro()
}

// insertRow runs the insert to its end (see Baseline.insert) and returns
// the new job's ID, or sql.ErrNoRows if the key is taken. With WholeJob it
// scans every column.
func (l *Lean) insertRow(ctx context.Context, args []any) (string, error) {
	rows, err := l.w.QueryContext(ctx, l.insert, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	id, found := "", false
	for rows.Next() {
		dest, idp, err := l.dest(rows, 0)
		if err != nil {
			return "", err
		}
		if err := rows.Scan(dest...); err != nil {
			return "", err
		}
		id, found = idp(), true
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if !found {
		return "", sql.ErrNoRows
	}
	return id, nil
}

// dest returns the scan destinations of a row of rows but its last extra
// columns, and a function that returns the row's ID once scanned.
func (l *Lean) dest(rows *sql.Rows, extra int) ([]any, func() string, error) {
	if l.features&WholeJob == 0 {
		if l.features&TextID != 0 {
			var s string
			return []any{&s}, func() string { return s }, nil
		}
		var n int64
		return []any{&n}, func() string { return strconv.FormatInt(n, 10) }, nil
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	vals := make([]any, len(cols)-extra)
	dest := make([]any, len(vals))
	for i := range vals {
		dest[i] = &vals[i]
	}
	return dest, func() string {
		switch v := vals[0].(type) {
		case int64:
			return strconv.FormatInt(v, 10)
		case string:
			return v
		case []byte:
			return string(v)
		}
		return fmt.Sprint(vals[0])
	}, nil
}

// readByKey reads the job of owner and key: its ID into id, and returns its
// stored hash.
func (l *Lean) readByKey(ctx context.Context, owner, key string, id *string) (any, error) {
	rows, err := l.r.QueryContext(ctx, l.byKey, owner, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	dest, idp, err := l.dest(rows, 1)
	if err != nil {
		return nil, err
	}
	if l.features&HexHash != 0 {
		var s string
		if err := rows.Scan(append(dest, &s)...); err != nil {
			return nil, err
		}
		*id = idp()
		return s, nil
	}
	var b []byte
	if err := rows.Scan(append(dest, &b)...); err != nil {
		return nil, err
	}
	*id = idp()
	return b, nil
}

// CountJobs implements Contender.
func (l *Lean) CountJobs(ctx context.Context, owner string) (int, error) {
	var n int
	err := l.r.QueryRowContext(ctx, rebind(l.dialect, `SELECT count(*) FROM lean_jobs WHERE owner = $1`), owner).Scan(&n)
	return n, err
}

// CloseIdleConns implements ConnWarmer.
func (l *Lean) CloseIdleConns() { closeIdle(l.w) }

// WarmConns implements ConnWarmer.
func (l *Lean) WarmConns(ctx context.Context, n int) error { return warmPool(ctx, l.dialect, l.w, n) }

// RoundTrips implements Contender.
func (l *Lean) RoundTrips() int64 { return l.trips.Load() }

// Close implements Contender.
func (l *Lean) Close() error {
	var err error
	if l.lock != nil {
		err = l.lock.Close()
	}
	if l.r == l.w {
		return errors.Join(err, closeAll(l.w))
	}
	return errors.Join(err, closeAll(l.w, l.r))
}

// flock is flock(2) on f, resumed after a signal.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
