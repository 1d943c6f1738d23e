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

// list and count take the same filters; list pages by --after, count
// counts what every page lists; bad filters are usage errors.
func TestListAndCount(t *testing.T) {
	t.Parallel()
	jobsctl(t, nil, "--help").want(t, 0, "list [FILTERS]", "count [FILTERS]", "--newer-than AGE")

	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := jobstest.NewClock(time.Now().UTC().Add(-time.Hour).Truncate(time.Second))
			m, err := jobs.New(db.store, jobs.Options{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			var alice []string // newest first
			for i := range 5 {
				clk.Advance(time.Minute)
				owner := []string{"alice", "bob"}[i%2]
				j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: owner, Key: fmt.Sprint("k", i), Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				if owner == "alice" {
					alice = append([]string{j.ID}, alice...)
				}
			}
			r := jobsctl(t, nil, db.args("list", "--owner", "alice", "--limit", "2")...)
			r.want(t, 0, alice[0], alice[1], "more: --after "+alice[1])
			if strings.Contains(r.stdout, alice[2]) {
				t.Errorf("a page of 2 lists a third job:\n%s", r.stdout)
			}
			r = jobsctl(t, nil, db.args("list", "--owner", "alice", "--limit", "2", "--after", alice[1])...)
			r.want(t, 0, alice[2])
			if strings.Contains(r.stdout, "more:") {
				t.Errorf("the last page says more follow:\n%s", r.stdout)
			}
			r = jobsctl(t, nil, db.args("list", "--json", "--state", "pending", "--kind", "charge", "--newer-than", "7d")...)
			var page jobPage
			if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Jobs) != 5 || page.Next != "" {
				t.Errorf("list --json = %+v, %v\n%s", page, err, r.stdout)
			}
			jobsctl(t, nil, db.args("list", "--state", "running")...).want(t, 0, "no job matches")
			jobsctl(t, nil, db.args("count", "--owner", "alice")...).want(t, 0, "3\n")
			jobsctl(t, nil, db.args("count", "--older-than", "2d")...).want(t, 0, "0\n")
			r = jobsctl(t, nil, db.args("count", "--json", "--provider", "stripe")...)
			if strings.TrimSpace(r.stdout) != `{"count":5}` && !strings.Contains(r.stdout, `"count": 5`) {
				t.Errorf("count --json = %q", r.stdout)
			}
			jobsctl(t, nil, db.args("list", "--state", "sleeping")...).wantError(t, 2, `"sleeping" is none of`)
			jobsctl(t, nil, db.args("count", "--newer-than", "soon")...).wantError(t, 2, "not an age")
			jobsctl(t, nil, db.args("list", "--limit", "0")...).wantError(t, 2, "--limit must be positive")
		})
	}
}
