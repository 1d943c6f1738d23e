package jobs_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/intentjobs/jobs"
)

// TestOpenSQLiteHonoursTheDSNsSettings checks that a setting the caller's
// DSN gives (under either of go-sqlite3's names) wins over the store's own,
// and that the store's own apply where the DSN is silent.
func TestOpenSQLiteHonoursTheDSNsSettings(t *testing.T) {
	t.Parallel()
	// The store's own: WAL, synchronous FULL, foreign keys on, and on the
	// writer a busy timeout of 20 ms and a page cache of 32 MiB.
	type settings struct {
		synchronous int // PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL
		journal     string
		foreignKeys int
		busyTimeout int // milliseconds
		cacheSize   int // pages, or KiB when negative
	}
	own := settings{2, "wal", 1, 20, -32768}
	for _, tc := range []struct {
		query string
		want  func(s settings) settings
	}{
		{"", func(s settings) settings { return s }},
		{"?_synchronous=NORMAL", func(s settings) settings { s.synchronous = 1; return s }},
		{"?_sync=NORMAL", func(s settings) settings { s.synchronous = 1; return s }},
		{"?_journal_mode=DELETE&_synchronous=OFF", func(s settings) settings { s.journal, s.synchronous = "delete", 0; return s }},
		{"?_journal=TRUNCATE", func(s settings) settings { s.journal = "truncate"; return s }},
		{"?_busy_timeout=1234", func(s settings) settings { s.busyTimeout = 1234; return s }},
		{"?_timeout=777", func(s settings) settings { s.busyTimeout = 777; return s }},
		{"?_foreign_keys=off", func(s settings) settings { s.foreignKeys = 0; return s }},
		{"?_fk=0", func(s settings) settings { s.foreignKeys = 0; return s }},
		{"?_cache_size=-1000", func(s settings) settings { s.cacheSize = -1000; return s }},
		{"?_cache_size=500&_sync=OFF", func(s settings) settings { s.cacheSize, s.synchronous = 500, 0; return s }},
	} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := jobs.OpenSQLite(ctx, filepath.Join(t.TempDir(), "jobs.db")+tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got settings
			for _, p := range []struct {
				pragma string
				dest   any
			}{
				{"synchronous", &got.synchronous},
				{"journal_mode", &got.journal},
				{"foreign_keys", &got.foreignKeys},
				{"busy_timeout", &got.busyTimeout},
				{"cache_size", &got.cacheSize},
			} {
				if err := s.DB().QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dest); err != nil {
					t.Fatalf("PRAGMA %s: %v", p.pragma, err)
				}
			}
			if want := tc.want(own); got != want {
				t.Errorf("settings %+v, want %+v", got, want)
			}
		})
	}
}
