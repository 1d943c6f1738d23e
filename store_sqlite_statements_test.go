package jobs

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The statements of the SQLite store's transactions run on go-sqlite3's
// connection itself (mattnStatements) and their rows are scanned by
// valuesRow, not database/sql. These tests hold both to what database/sql
// does with the same statements: the same rows scanned the same way, the
// same arguments accepted and the same refused.

func TestValuesRowScansAsDatabaseSQL(t *testing.T) {
	t.Parallel()
	micros := time.Date(2026, 12, 3, 10, 0, 0, 123456000, time.UTC)
	var (
		s         string
		js        JobState
		as        AttemptState
		i64       int64
		n         int
		b         bool
		raw       []byte
		null      sql.NullString
		tm        time.Time
		wantBytes = []byte(`{"a":1}`)
	)
	for _, c := range []struct {
		name string
		dest any
		v    driver.Value
		want any
		got  func() any
	}{
		{"text into string", &s, "abc", "abc", func() any { return s }},
		{"text into a job state", &js, "running", JobRunning, func() any { return js }},
		{"text into an attempt state", &as, "unknown", AttemptUnknown, func() any { return as }},
		{"integer into int64", &i64, int64(1 << 40), int64(1 << 40), func() any { return i64 }},
		{"integer into int", &n, int64(7), 7, func() any { return n }},
		{"integer into bool", &b, int64(1), true, func() any { return b }},
		{"zero into bool", &b, int64(0), false, func() any { return b }},
		{"bool into bool", &b, true, true, func() any { return b }},
		{"text into bytes", &raw, `{"a":1}`, wantBytes, func() any { return raw }},
		{"blob into bytes", &raw, []byte(`{"a":1}`), wantBytes, func() any { return raw }},
		{"NULL into bytes", &raw, nil, []byte(nil), func() any { return raw }},
		{"NULL into a NullString", &null, nil, sql.NullString{}, func() any { return null }},
		{"text into a NullString", &null, "x", sql.NullString{String: "x", Valid: true}, func() any { return null }},
		{"microseconds into a time", dbTime{&tm}, micros.UnixMicro(), micros, func() any { return tm }},
		{"NULL into a time", dbTime{&tm}, nil, time.Time{}, func() any { return tm }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := (valuesRow{c.v}).Scan(c.dest); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, c.got()); diff != "" {
				t.Errorf("scanned (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("bytes are a copy", func(t *testing.T) {
		src := []byte("abc")
		var dst []byte
		if err := (valuesRow{src}).Scan(&dst); err != nil {
			t.Fatal(err)
		}
		src[0] = 'x'
		if string(dst) != "abc" {
			t.Errorf("scanned bytes changed with the driver's: %q", dst)
		}
	})
}

func TestValuesRowRefusesWhatDatabaseSQLRefuses(t *testing.T) {
	t.Parallel()
	var (
		s   string
		n   int64
		raw []byte
	)
	for _, c := range []struct {
		name string
		row  valuesRow
		dest []any
		want string
	}{
		{"NULL into string", valuesRow{nil}, []any{&s}, "cannot scan <nil> into *string"},
		{"text into int64", valuesRow{"7"}, []any{&n}, "cannot scan string into *int64"},
		{"integer into bytes", valuesRow{int64(7)}, []any{&raw}, "cannot scan int64 into *[]uint8"},
		{"a destination of no known type", valuesRow{"x"}, []any{new(float32)}, "cannot scan string into *float32"},
		{"more columns than destinations", valuesRow{"x", "y"}, []any{&s}, "2 columns scanned into 1 destinations"},
		{"fewer columns than destinations", valuesRow{"x"}, []any{&s, &n}, "1 columns scanned into 2 destinations"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.row.Scan(c.dest...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Scan = %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestSQLiteStatementsOnTheDriver runs the same statements through both
// kinds of sqliteConnStatements: sqliteStatements (on go-sqlite3's
// connection, when built with cgo) and connStatements (database/sql, what
// any other driver gets), and compares the rows they read with what
// database/sql reads.
func TestSQLiteStatementsOnTheDriver(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		run    func(conn *sql.Conn, fn func(sqliteConnStatements) error) error
		driver bool // the statements run on go-sqlite3's connection
	}{
		{"sqliteStatements", sqliteStatements, sqliteDriverName != ""},
		{"connStatements", func(conn *sql.Conn, fn func(sqliteConnStatements) error) error {
			return fn(connStatements{conn})
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testStatements(t, c.run, c.driver)
		})
	}
}

func testStatements(t *testing.T, run func(*sql.Conn, func(sqliteConnStatements) error) error, driver bool) {
	ctx := context.Background()
	store, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	conn, err := store.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE t (s TEXT, n INTEGER, b BLOB, z TEXT)`); err != nil {
		t.Fatal(err)
	}

	type row struct {
		S string
		N int
		B []byte
		Z sql.NullString
	}
	scan := func(sc scanner) (row, error) {
		var r row
		return r, sc.Scan(&r.S, &r.N, &r.B, &r.Z)
	}
	const query = `SELECT s, n, b, z FROM t WHERE s = ?1`
	keys := []string{"running", "second"}
	var onDriver []row
	err = run(conn, func(st sqliteConnStatements) error {
		if _, viaSQL := st.(connStatements); viaSQL == driver {
			t.Errorf("statements through database/sql: %v, want %v", viaSQL, !driver)
		}
		// An int, a named string type and a bool are converted as
		// database/sql converts them.
		n, err := st.exec(ctx, `INSERT INTO t VALUES (?1, ?2, ?3, NULL)`, AttemptRunning, 42, []byte("blob"))
		if err != nil || n != 1 {
			return errors.Join(err, errors.New("insert: rows"))
		}
		if _, err := st.exec(ctx, `INSERT INTO t VALUES (?1, ?2, NULL, ?3)`, "second", true, "z"); err != nil {
			return err
		}
		// An argument no driver takes is refused before anything runs.
		if _, err := st.exec(ctx, `INSERT INTO t VALUES (?1, 0, NULL, NULL)`, struct{}{}); err == nil {
			t.Error("a struct argument was accepted")
		}
		for _, key := range keys {
			r, err := scan(st.queryRow(ctx, query, key))
			if err != nil {
				return err
			}
			onDriver = append(onDriver, r)
		}
		// A write that returns its row, read to the statement's end.
		if _, err := st.exec(ctx, `INSERT INTO t VALUES ('third', 3, NULL, 'z')`); err != nil {
			return err
		}
		var z string
		if err := st.writeRow(ctx, `UPDATE t SET z = 'w' WHERE s = ?1 RETURNING z`, "third").Scan(&z); err != nil || z != "w" {
			t.Errorf("writeRow: %q, %v; want \"w\"", z, err)
		}
		if err := st.writeRow(ctx, `UPDATE t SET z = 'w' WHERE s = 'none' RETURNING z`).Scan(&z); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("writeRow that changes nothing: %v, want sql.ErrNoRows", err)
		}
		if _, err := scan(st.queryRow(ctx, `SELECT s, n, b, z FROM t WHERE s = 'none'`)); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("a query without rows: %v, want sql.ErrNoRows", err)
		}
		if _, err := scan(st.queryRow(ctx, `SELECT nope FROM t`)); err == nil || errors.Is(err, sql.ErrNoRows) {
			t.Errorf("a query that does not compile: %v, want SQLite's error", err)
		}
		wide := "SELECT " + strings.TrimSuffix(strings.Repeat("1, ", 30), ", ")
		if err := st.queryRow(ctx, wide).Scan(); err == nil || !strings.Contains(err.Error(), "30") {
			t.Errorf("a row of 30 columns: %v, want an error naming them", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// database/sql reads the same rows the same way. (Not inside run:
	// sqliteStatements holds the connection.)
	for i, key := range keys {
		want, err := scan(conn.QueryRowContext(ctx, query, key))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, onDriver[i]); diff != "" {
			t.Errorf("%s: (-database/sql +statements):\n%s", key, diff)
		}
	}
	var count int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM t`).Scan(&count); err != nil || count != 3 {
		t.Fatalf("rows in t: %d, %v; want 3 (the refused insert wrote nothing)", count, err)
	}
}
