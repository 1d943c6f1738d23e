package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// stale --limit is documented, and lists the least recently updated
// attempts first, saying when it left some out.
func TestStaleLimitIsDocumentedAndSaysWhatItLeftOut(t *testing.T) {
	t.Parallel()
	r := jobsctl(t, nil, "--help")
	r.want(t, 0, "stale [--older-than 5m] [--limit 100]", "at most --limit of them, least recent first")

	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := jobstest.NewClock(time.Now().UTC().Add(-time.Hour).Truncate(time.Second))
			m, err := jobs.New(db.store, jobs.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var unknown []string // least recently updated first
			for i := range 3 {
				j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: fmt.Sprint("k", i), Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				a, err := m.StartAttempt(ctx, j.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
				if _, err := m.MarkUnknown(ctx, a.ID, "timed out"); err != nil {
					t.Fatal(err)
				}
				unknown = append(unknown, a.ID)
			}
			const more = "the 2 least recently updated shown; there are more (raise --limit)"

			r := jobsctl(t, nil, db.args("stale", "--limit", "2")...)
			r.want(t, 0, unknown[0], unknown[1], more)
			if strings.Contains(r.stdout, unknown[2]) {
				t.Errorf("stale --limit 2 lists a third attempt:\n%s", r.stdout)
			}
			r = jobsctl(t, nil, db.args("stale", "--limit", "3")...)
			r.want(t, 0, unknown[0], unknown[1], unknown[2])
			if strings.Contains(r.stdout, "there are more") {
				t.Errorf("stale --limit 3 says some were left out:\n%s", r.stdout)
			}
			r = jobsctl(t, nil, db.args("stale", "--json", "--limit", "2")...)
			var rows []jobs.Attempt
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 || rows[0].ID != unknown[0] {
				t.Errorf("stale --json --limit 2 = %+v, %v", rows, err)
			}
			jobsctl(t, nil, db.args("stale", "--limit", "0")...).wantError(t, 2, "--limit must be positive")
		})
	}
}
