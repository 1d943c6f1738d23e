package memstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/memstore"
)

// A unit test of code that submits jobs needs no database: over a memory
// store, a double click makes one job, as it does over PostgreSQL.
func Example() {
	ctx := context.Background()
	m, err := jobs.New(memstore.New(), jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	checkout := jobs.SubmitRequest{
		Owner:    "user-42",
		Key:      "checkout-7f3a",
		Kind:     "charge",
		Provider: "acme",
		Params:   json.RawMessage(`{"amount":1200,"currency":"eur"}`),
	}
	first, created, err := m.Submit(ctx, checkout)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first click creates a job:", created)

	again, created, err := m.Submit(ctx, checkout)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second click creates a job:", created)
	fmt.Println("both clicks get the same job:", again.ID == first.ID)

	stored, err := m.Store().(jobs.JobLister).ListJobs(ctx, jobs.JobQuery{Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs stored:", len(stored))
	// Output:
	// first click creates a job: true
	// second click creates a job: false
	// both clicks get the same job: true
	// jobs stored: 1
}
