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
