package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// A purge that would forget keys sooner than the service promised clients
// needs --force: otherwise a replayed key makes a second job.
func TestPurgeBelowAdvertisedRetentionNeedsForce(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			h := seed(t, db.store) // order-42 closed about two hours ago, order-41 two days ago
			replay := func() (jobs.Job, bool) {
				t.Helper()
				j, created, err := jobstest.NewManager(t, db.store, jobs.Options{}).Submit(context.Background(), jobs.SubmitRequest{Owner: "user-7", Key: "order-42",
					Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{"amount":1200,"currency":"eur"}`)})
				if err != nil {
					t.Fatal(err)
				}
				return j, created
			}

			refusals := []struct {
				name string
				args []string
				msg  string
			}{
				{"below the default retention", []string{"--older-than", "1m"},
					"--older-than 1m is below the 24h retention the service advertises, so a key replayed within 24h of its job closing would make a second job; give --force"},
				{"below the given retention", []string{"--retention", "3h", "--older-than", "90m"},
					"--older-than 1h30m is below the 3h retention"},
				{"with --json", []string{"--json", "--older-than", "1h"}, "give --force"},
			}
			for _, tc := range refusals {
				jobsctl(t, nil, db.args(append([]string{"purge"}, tc.args...)...)...).wantError(t, 2, tc.msg)
				if _, err := db.store.Job(context.Background(), h.raced.ID); err != nil {
					t.Fatalf("%s: the refused purge deleted %s: %v", tc.name, h.raced.ID, err)
				}
			}
			if j, created := replay(); created || j.ID != h.raced.ID {
				t.Fatalf("after refused purges, a replay of order-42 made job %s (created %v), want %s", j.ID, created, h.raced.ID)
			}

			// Counting deletes nothing, so it needs no --force.
			jobsctl(t, nil, db.args("purge", "--older-than", "1m", "--dry-run")...).want(t, 0, "would purge 2 jobs and 2 attempts")
			// --older-than defaults to --retention: a service that keeps keys
			// for an hour has its two-hour-old job purged.
			jobsctl(t, nil, db.args("purge", "--retention", "1h", "--dry-run")...).want(t, 0, "would purge 2 jobs")
			jobsctl(t, nil, db.args("purge", "--retention", "3h", "--dry-run")...).want(t, 0, "would purge 1 job and 0 attempts")

			// With --force the operator gets what they asked for, and what
			// the refusal said: the replay is a new job.
			jobsctl(t, nil, db.args("purge", "--older-than", "1m", "--force")...).want(t, 0, "purged 2 jobs and 2 attempts")
			if _, err := db.store.Job(context.Background(), h.raced.ID); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("forced purge kept %s: %v", h.raced.ID, err)
			}
			if j, created := replay(); !created || j.ID == h.raced.ID {
				t.Errorf("after a forced purge, a replay of order-42 gave job %s (created %v), want a new job", j.ID, created)
			}
		})
	}
}
