package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/intentjobs/jobs"
)

// A client that retries with the same key after a failure gets a new job
// when it asks for key reuse; the failed job stays as it was, and names
// its replacement. Another intent under the key is still a conflict.
func ExampleKeyReuse() {
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
		Params: json.RawMessage(`{"amount": 1200}`), Reuse: jobs.KeyReuseAfterFailure}
	first, _, _ := m.Submit(ctx, req)
	m.FailJob(ctx, first.ID, "card declined")

	second, created, _ := m.Submit(ctx, req) // the same key, after the failure
	fmt.Println("new job:", created, second.ID != first.ID, second.State)

	old, _ := m.Get(ctx, first.ID)
	fmt.Println("old job:", old.State, old.Key, old.ReplacedBy == second.ID)
	byKey, _ := m.GetByKey(ctx, "user-42", "checkout-7f3a")
	fmt.Println("the key leads to the new job:", byKey.ID == second.ID)

	other := req
	other.Params = json.RawMessage(`{"amount": 9900}`)
	_, _, err = m.Submit(ctx, other)
	fmt.Println("other intent:", errors.Is(err, jobs.ErrKeyConflict))
	// Output:
	// new job: true true pending
	// old job: failed checkout-7f3a true
	// the key leads to the new job: true
	// other intent: true
}
