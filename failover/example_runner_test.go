package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// cannedProvider stands for a real backend in the examples: it acknowledges
// each request with a reference and answers with its result or its error.
type cannedProvider struct {
	result json.RawMessage
	err    error
}

func (p cannedProvider) Call(ctx context.Context, job jobs.Job, a jobs.Attempt, ack func(ref string) error) (json.RawMessage, error) {
	if p.err != nil {
		return nil, p.err
	}
	ack("req-" + a.Provider)
	return p.result, nil
}

func (p cannedProvider) Lookup(ctx context.Context, a jobs.Attempt) (failover.Outcome, error) {
	return failover.Outcome{State: failover.OutcomeSucceeded, Result: p.result}, nil
}

// A Runner runs a job end to end: the job's provider refuses, so the
// Runner fails that attempt and fails over to the next provider, whose
// result completes the job.
func ExampleRunner_Run() {
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

	r := &failover.Runner{
		Manager: m,
		Providers: map[string]failover.Provider{
			"model-a": cannedProvider{err: failover.Definitive(errors.New("over capacity"))},
			"model-b": cannedProvider{result: json.RawMessage(`{"summary":"short"}`)},
		},
		Fallbacks: []string{"model-b"},
	}
	job, _, _ := m.Submit(ctx, jobs.SubmitRequest{Owner: "u1", Key: "k1", Kind: "summarize",
		Provider: "model-a", Params: json.RawMessage(`{"text":"a long text"}`)})
	job, err = r.Run(ctx, job.ID)
	fmt.Println(job.State, string(job.Result), err)

	attempts, _ := m.Attempts(ctx, job.ID)
	for _, a := range attempts {
		fmt.Printf("attempt %d, %s: %s (ref %q, reason %q)\n", a.Seq, a.Provider, a.State, a.ProviderRef, a.Reason)
	}
	// Output:
	// succeeded {"summary":"short"} <nil>
	// attempt 1, model-a: failed (ref "", reason "provider refused: over capacity")
	// attempt 2, model-b: succeeded (ref "req-model-b", reason "")
}
