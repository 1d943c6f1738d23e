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
	for _, tc := range []struct {
		query       string
		synchronous int // PRAGMA synchronous: 1 NORMAL, 2 FULL
		journal     string
	}{
		{"", 2, "wal"},
		{"?_synchronous=NORMAL", 1, "wal"},
		{"?_sync=NORMAL", 1, "wal"},
		{"?_journal_mode=DELETE&_synchronous=OFF", 0, "delete"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := jobs.OpenSQLite(ctx, filepath.Join(t.TempDir(), "jobs.db")+tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var synchronous int
			var journal string
			if err := s.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&synchronous); err != nil {
				t.Fatal(err)
			}
			if err := s.DB().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
				t.Fatal(err)
			}
			if synchronous != tc.synchronous || journal != tc.journal {
				t.Errorf("synchronous %d, journal %s; want %d, %s", synchronous, journal, tc.synchronous, tc.journal)
			}
		})
	}
}
