package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/intentjobs/jobs"
)

// The model in one run: a double click is one job; an attempt that times
// out is unknown, not failed, and no second attempt starts while it is in
// doubt; its late result still completes the job, once.
func Example() {
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

	req := jobs.SubmitRequest{Owner: "user-42", Key: "checkout-7f3a", Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount": 1200, "currency": "eur"}`)}
	job, created, _ := m.Submit(ctx, req)
	again, createdAgain, _ := m.Submit(ctx, req) // the second click
	fmt.Println("one job:", again.ID == job.ID, created, createdAgain)

	a, _ := m.StartAttempt(ctx, job.ID, "")
	m.MarkUnknown(ctx, a.ID, "no answer after 30s")
	_, err = m.StartAttempt(ctx, job.ID, "")
	fmt.Println("retry while in doubt:", errors.Is(err, jobs.ErrAttemptInFlight))

	job, err = m.Complete(ctx, a.ID, json.RawMessage(`{"charge":"ch_1"}`))
	fmt.Println(job.State, string(job.Result), err)
	// Output:
	// one job: true true false
	// retry while in doubt: true
	// succeeded {"charge":"ch_1"} <nil>
}

// A double click: the same owner and key submitted twice is one job.
func ExampleManager_Submit() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "jobs-example")
	defer os.RemoveAll(dir)
	store, err := jobs.OpenSQLite(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := jobs.New(store, jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}

	req := jobs.SubmitRequest{
		Owner: "user-42", Key: "checkout-7f3a", Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount": 1200, "currency": "eur"}`),
	}
	first, created1, _ := m.Submit(ctx, req)
	req.Params = json.RawMessage(`{"currency":"eur","amount":1200}`) // same intent, other key order
	second, created2, _ := m.Submit(ctx, req)
	fmt.Println("created:", created1, created2)
	fmt.Println("same job:", first.ID == second.ID)

	req.Params = json.RawMessage(`{"amount": 9900, "currency": "eur"}`)
	_, _, err = m.Submit(ctx, req)
	var conflict *jobs.KeyConflictError
	fmt.Println("other amount, same key:", errors.Is(err, jobs.ErrKeyConflict), errors.As(err, &conflict) && conflict.JobID == first.ID)
	// Output:
	// created: true false
	// same job: true
	// other amount, same key: true true
}

// Two attempts race; the first to finish wins, the late one is dropped.
func ExampleManager_Complete() {
	ctx := context.Background()
	store, err := jobs.OpenSQLite(ctx, ":memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := jobs.New(store, jobs.Options{Hedging: true, Logger: discard})
	if err != nil {
		log.Fatal(err)
	}

	job, _, _ := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "summarize", Provider: "model-a", Params: json.RawMessage(`{}`)})
	a, _ := m.StartAttempt(ctx, job.ID, "")
	m.MarkRunning(ctx, a.ID, "req-a")
	b, _ := m.StartAttempt(ctx, job.ID, "model-b") // a hedge: allowed past a running attempt

	done, _ := m.Complete(ctx, b.ID, json.RawMessage(`{"summary":"from b"}`))
	_, err = m.Complete(ctx, a.ID, json.RawMessage(`{"summary":"from a"}`))
	fmt.Println(done.State, string(done.Result))
	fmt.Println("late result:", errors.Is(err, jobs.ErrLostRace))
	// Output:
	// succeeded {"summary":"from b"}
	// late result: true
}
