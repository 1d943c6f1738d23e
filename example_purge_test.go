package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

// A key is bound to its job for the retention period; once the job is
// purged, the same key is a new intent.
func ExampleManager_Purge() {
	ctx := context.Background()
	store, err := jobs.OpenSQLite(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	clock := jobstest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, err := jobs.New(store, jobs.Options{Clock: clock, Retention: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}

	req := jobs.SubmitRequest{Owner: "u", Key: "order-42", Kind: "charge", Provider: "acme", Params: json.RawMessage(`{"amount":1200}`)}
	first, _, _ := m.Submit(ctx, req)
	m.CancelJob(ctx, first.ID, "customer changed their mind")

	clock.Advance(23 * time.Hour)
	res, _ := m.Purge(ctx, jobs.PurgeOptions{})
	fmt.Println("after 23h:", res)
	clock.Advance(2 * time.Hour)
	res, _ = m.Purge(ctx, jobs.PurgeOptions{})
	fmt.Println("after 25h:", res)

	again, created, _ := m.Submit(ctx, req)
	fmt.Println("new job:", created, again.ID != first.ID)
	// Output:
	// after 23h: purged 0 jobs and 0 attempts closed before 2026-05-01T08:00:00Z
	// after 25h: purged 1 job and 0 attempts closed before 2026-05-01T10:00:00Z
	// new job: true true
}
