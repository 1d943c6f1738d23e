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

// A contract per kind, a verification before failover, and a result that
// breaks the contract.
func ExampleManager_VerifyProvider() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "jobs-example")
	defer os.RemoveAll(dir)
	store, err := jobs.OpenSQLite(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	summary := jobs.Contract{Version: "v1", Validate: func(r json.RawMessage) error {
		var v struct{ Summary string }
		if err := json.Unmarshal(r, &v); err != nil || v.Summary == "" {
			return errors.New("no summary")
		}
		return nil
	}}
	m, err := jobs.New(store, jobs.Options{Logger: discard, Contracts: map[string]jobs.Contract{"summarize": summary}})
	if err != nil {
		log.Fatal(err)
	}

	job, _, _ := m.Submit(ctx, jobs.SubmitRequest{Owner: "u1", Key: "k1", Kind: "summarize",
		Provider: "model-a", Params: json.RawMessage(`{"url":"https://example.com"}`)})

	// Failing over to model-b is refused until model-b is verified.
	_, err = m.StartAttempt(ctx, job.ID, "model-b")
	fmt.Println("unverified:", errors.Is(err, jobs.ErrProviderUnverified))

	v, _ := m.VerifyProvider(ctx, "model-b", "summarize", func(ctx context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"summary":"a real answer"}`), nil // call model-b with real inputs here
	})
	fmt.Println("verified:", v.Passed, v.ContractVersion)

	a, err := m.StartAttempt(ctx, job.ID, "model-b")
	fmt.Println("failover attempt:", err == nil)

	// An HTTP 200 with an empty object is not a result.
	_, err = m.Complete(ctx, a.ID, json.RawMessage(`{}`))
	var cv *jobs.ContractViolationError
	fmt.Println("violation:", errors.As(err, &cv), cv.Reason)
	a, _ = m.Attempt(ctx, a.ID)
	job, _ = m.Get(ctx, job.ID)
	fmt.Println("attempt:", a.State, "job:", job.State)
	// Output:
	// unverified: true
	// verified: true v1
	// failover attempt: true
	// violation: true no summary
	// attempt: failed job: running
}
