package jobs_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// TestListenDSNRejectsBadInputAndWritesNothing: a ListenDSN that pgx
// cannot parse, or an empty one, makes opening fail with ErrInvalidInput
// before the schema is applied. (ListenDSN given to the SQLite store does
// not compile: it is a PostgresOption.)
func TestListenDSNRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		listen string
	}{
		{"unparsable", "postgres://127.0.0.1:notaport/db"},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := testdb.PostgresDSN(t)
			_, err := jobs.OpenPostgres(ctx, dsn, jobs.ListenDSN(tc.listen))
			db, _ := sql.Open("pgx", dsn)
			defer db.Close()
			var input *jobs.InputError
			if !errors.As(err, &input) || input.Field != "ListenDSN" {
				t.Fatalf("open with ListenDSN(%q) = %v; want an InputError for ListenDSN", tc.listen, err)
			}
			var tables int
			q := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`
			if err := db.QueryRowContext(ctx, q).Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("%d tables created by an open that failed", tables)
			}
		})
	}
}

// TestListenDSNOpensTheListeningConnection: with ListenDSN, the store
// listens through a connection with those settings, not the pool's, and
// is notified through it.
func TestListenDSNOpensTheListeningConnection(t *testing.T) {
	t.Parallel()
	suffix := fmt.Sprint(time.Now().UnixNano())
	dsn := testdb.PostgresDSN(t)
	pool := withQuery(t, dsn, "application_name", "jobs_pool_"+suffix)
	listen := withQuery(t, dsn, "application_name", "jobs_listen_"+suffix)
	ctx := context.Background()
	s, err := jobs.OpenPostgres(ctx, pool, jobs.ListenDSN(listen))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := submitJob(t, m, "listen-dsn")
	wake, stop, err := s.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatalf("NotifyClosed: %v", err)
	}
	defer stop()
	rows, err := s.DB().QueryContext(ctx, `SELECT application_name FROM pg_stat_activity
		WHERE query LIKE 'LISTEN "intentjobs_closed.%' AND application_name LIKE '%' || $1`, suffix)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "jobs_listen_"+suffix {
		t.Fatalf("listening connections: %q; want one, opened with ListenDSN's application_name jobs_listen_%s", names, suffix)
	}
	hearClose(t, m, j.ID, wake)
}

// withQuery returns the URL DSN with one query parameter set.
func withQuery(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN is not a URL: %v", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestNotifyClosedOnADatabaseNotInUTF8: the listening connection works on
// a database whose encoding (and so client_encoding) is not UTF8, such as
// one created by an initdb run without a UTF-8 locale.
func TestNotifyClosedOnADatabaseNotInUTF8(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t) // skips without PostgreSQL
	base := os.Getenv(testdb.EnvPostgresDSN)
	ctx := context.Background()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() }) // after the drop below
	name := fmt.Sprintf("jobs_ascii_%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+name+` ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.WithoutCancel(ctx), `DROP DATABASE `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	s, err := jobs.OpenPostgres(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var enc string
	if err := s.DB().QueryRowContext(ctx, `SHOW client_encoding`).Scan(&enc); err != nil || enc != "SQL_ASCII" {
		t.Fatalf("client_encoding %q (%v); want SQL_ASCII", enc, err)
	}
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := submitJob(t, m, "ascii")
	wake, stop, err := s.NotifyClosed(ctx, j.ID)
	if err != nil {
		t.Fatalf("NotifyClosed with client_encoding SQL_ASCII: %v", err)
	}
	defer stop()
	hearClose(t, m, j.ID, wake)
}

// hearClose completes an attempt of job jobID and fails t unless wake,
// registered for it, hears of it within a minute.
func hearClose(t *testing.T, m *jobs.Manager, jobID string, wake <-chan struct{}) {
	t.Helper()
	a := startAttempt(t, m, jobID)
	if _, err := m.Complete(context.Background(), a.ID, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(time.Minute):
		t.Fatal("no notification a minute after the job closed")
	}
}
