package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/intentjobs/jobs"
)

// Wait holds a request open until a worker finishes the job, or until the
// caller stops waiting and answers with the job as it stands.
func ExampleManager_Wait() {
	ctx := context.Background()
	store, err := jobs.OpenSQLite(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := jobs.New(store, jobs.Options{Logger: discard})
	if err != nil {
		log.Fatal(err)
	}
	job, _, _ := m.Submit(ctx, jobs.SubmitRequest{Owner: "u1", Key: "k1", Kind: "charge",
		Provider: "acme", Params: json.RawMessage(`{"amount":1200}`)})

	// Nobody works on the job yet: Wait gives up with the caller's
	// context (and returns the job as it last read it, for the answer).
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = m.Wait(short, job.ID)
	cancel()
	fmt.Println("gave up:", errors.Is(err, context.DeadlineExceeded))

	// A worker, elsewhere, runs the job.
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		a, _ := m.StartAttempt(ctx, job.ID, "")
		m.MarkRunning(ctx, a.ID, "ch_123")
		m.Complete(ctx, a.ID, json.RawMessage(`{"charged":1200}`))
	}()
	j, err := m.Wait(ctx, job.ID)
	fmt.Println(j.State, string(j.Result), err)
	<-worker
	// Output:
	// gave up: true
	// succeeded {"charged":1200} <nil>
}
