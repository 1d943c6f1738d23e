package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// TestObserverSeesScriptedScenario drives one scripted scenario through the
// Manager and checks that the observer sees exactly its events, in order,
// with the jobs, attempts and winners they concern, and nothing for calls
// that changed nothing.
func TestObserverSeesScriptedScenario(t *testing.T) {
	t.Parallel()
	for _, sc := range opsStores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			log := &eventRecorder{}
			clk := jobstest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
			m, err := jobs.New(sc.open(t), jobs.Options{Observer: log, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			start := func(jobID, provider string, opts ...jobs.AttemptOption) jobs.Attempt {
				t.Helper()
				a, err := m.StartAttempt(ctx, jobID, provider, opts...)
				must(err)
				return a
			}
			type ev struct{ typ, job, att, winner string }
			var want []ev
			expect := func(typ jobs.EventType, job, att, winner string) {
				want = append(want, ev{string(typ), job, att, winner})
			}

			// A double click, then the same key with another amount.
			j1 := submitOK(t, m, chargeReq("u", "k1"))
			expect(jobs.EventJobCreated, j1.ID, "", "")
			submitOK(t, m, chargeReq("u", "k1"))
			expect(jobs.EventJobReplayed, j1.ID, "", "")
			other := chargeReq("u", "k1")
			other.Params = json.RawMessage(`{"amount":1}`)
			if _, _, err := m.Submit(ctx, other); !errors.Is(err, jobs.ErrKeyConflict) {
				t.Fatalf("conflict: %v", err)
			}
			expect(jobs.EventKeyConflict, j1.ID, "", "")

			// Two attempts race; the hedge finishes first and wins.
			a1 := start(j1.ID, "")
			expect(jobs.EventAttemptStarted, j1.ID, a1.ID, "")
			if _, err := m.StartAttempt(ctx, j1.ID, ""); !errors.Is(err, jobs.ErrAttemptInFlight) {
				t.Fatalf("second attempt: %v", err)
			}
			expect(jobs.EventAttemptRefused, j1.ID, "", "")
			_, err = m.MarkRunning(ctx, a1.ID, "ch_1")
			must(err)
			expect(jobs.EventAttemptRunning, j1.ID, a1.ID, "")
			_, err = m.MarkRunning(ctx, a1.ID, "ch_1") // a retry: no change, no event
			must(err)
			a2 := start(j1.ID, "", jobs.Hedge())
			expect(jobs.EventAttemptStarted, j1.ID, a2.ID, "")
			_, err = m.Complete(ctx, a2.ID, json.RawMessage(`{"by":"backup"}`))
			must(err)
			expect(jobs.EventAttemptSucceeded, j1.ID, a2.ID, "")
			_, err = m.Complete(ctx, a2.ID, json.RawMessage(`{"by":"backup"}`)) // a retry
			must(err)
			if _, err := m.Complete(ctx, a1.ID, json.RawMessage(`{"by":"primary"}`)); !errors.Is(err, jobs.ErrLostRace) {
				t.Fatalf("late complete: %v", err)
			}
			expect(jobs.EventRaceLost, j1.ID, a1.ID, a2.ID)
			if _, err := m.StartAttempt(ctx, j1.ID, ""); !errors.Is(err, jobs.ErrJobClosed) {
				t.Fatalf("attempt on a closed job: %v", err)
			}
			expect(jobs.EventAttemptRefused, j1.ID, "", "")

			// A timeout, the provider's refusal, and giving up.
			j2 := submitOK(t, m, chargeReq("u", "k2"))
			expect(jobs.EventJobCreated, j2.ID, "", "")
			a3 := start(j2.ID, "")
			expect(jobs.EventAttemptStarted, j2.ID, a3.ID, "")
			_, err = m.MarkUnknown(ctx, a3.ID, "no answer after 30s")
			must(err)
			expect(jobs.EventAttemptUnknown, j2.ID, a3.ID, "")
			_, err = m.Fail(ctx, a3.ID, "declined")
			must(err)
			expect(jobs.EventAttemptFailed, j2.ID, a3.ID, "")
			_, err = m.Fail(ctx, a3.ID, "declined") // a retry
			must(err)
			_, err = m.FailJob(ctx, j2.ID, "card declined")
			must(err)
			expect(jobs.EventJobFailed, j2.ID, "", "")

			// Cancelled out of band while an attempt runs; its result comes late.
			j3 := submitOK(t, m, chargeReq("u", "k3"))
			expect(jobs.EventJobCreated, j3.ID, "", "")
			a4 := start(j3.ID, "")
			expect(jobs.EventAttemptStarted, j3.ID, a4.ID, "")
			_, err = m.CancelJob(ctx, j3.ID, "user cancelled")
			must(err)
			expect(jobs.EventJobCancelled, j3.ID, "", "")
			if _, err := m.Complete(ctx, a4.ID, json.RawMessage(`{}`)); !errors.Is(err, jobs.ErrJobClosed) {
				t.Fatalf("complete after cancel: %v", err)
			}
			expect(jobs.EventResultDropped, j3.ID, a4.ID, "")

			// An attempt cancelled by an operator; its job stays open.
			j4 := submitOK(t, m, chargeReq("u", "k4"))
			expect(jobs.EventJobCreated, j4.ID, "", "")
			a5 := start(j4.ID, "")
			expect(jobs.EventAttemptStarted, j4.ID, a5.ID, "")
			_, err = m.Cancel(ctx, a5.ID, "never sent")
			must(err)
			expect(jobs.EventAttemptCancelled, j4.ID, a5.ID, "")

			// Retention: j1, j2 and j3 are closed with every attempt finished.
			clk.Advance(25 * time.Hour)
			res, err := m.Purge(ctx, jobs.PurgeOptions{})
			must(err)
			if res.Jobs != 3 || res.Attempts != 4 {
				t.Errorf("purge = %+v, want 3 jobs and 4 attempts", res)
			}
			expect(jobs.EventPurged, "", "", "")
			// A dry run is not a purge.
			_, err = m.Purge(ctx, jobs.PurgeOptions{DryRun: true})
			must(err)

			var got []ev
			for _, e := range log.events {
				got = append(got, ev{string(e.Type), e.JobID, e.AttemptID, e.WinnerID})
				if e.Time.IsZero() || e.Duration <= 0 {
					t.Errorf("%s: time %v, duration %v; want both set", e.Type, e.Time, e.Duration)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events:\n got  %s\n want %s", formatEvents(got), formatEvents(want))
			}
			for _, e := range log.events {
				switch e.Type {
				case jobs.EventAttemptRefused:
					if e.Err == nil {
						t.Errorf("refusal without its error")
					}
				case jobs.EventJobCreated, jobs.EventJobReplayed:
					if e.Owner != "u" || e.Kind != "charge" || e.Provider != "stripe" {
						t.Errorf("%s: owner %q kind %q provider %q", e.Type, e.Owner, e.Kind, e.Provider)
					}
				case jobs.EventAttemptFailed, jobs.EventAttemptUnknown:
					if e.Reason == "" {
						t.Errorf("%s without its reason", e.Type)
					}
				case jobs.EventPurged:
					if e.Count != 3 || e.Attempts != 4 {
						t.Errorf("purged event counts %d jobs, %d attempts", e.Count, e.Attempts)
					}
				}
				if e.AttemptID != "" && e.Provider != "stripe" {
					t.Errorf("%s of attempt %s: provider %q, want stripe", e.Type, e.AttemptID, e.Provider)
				}
			}
		})
	}
}

func formatEvents[T any](evs []T) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n   %v", e)
	}
	return b.String()
}
