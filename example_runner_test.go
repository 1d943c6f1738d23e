package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"time"

	"github.com/intentjobs/jobs"
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

func (p cannedProvider) Lookup(ctx context.Context, a jobs.Attempt) (jobs.Outcome, error) {
	return jobs.Outcome{State: jobs.OutcomeSucceeded, Result: p.result}, nil
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

	r := &jobs.Runner{
		Manager: m,
		Providers: map[string]jobs.Provider{
			"model-a": cannedProvider{err: jobs.Definitive(errors.New("over capacity"))},
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

// The schema for golang-migrate: the same SQL, named NNNN_name.up.sql.
// Hand it to golang-migrate's iofs source:
//
//	src, _ := iofs.New(fsys, ".")
//	mg, _ := migrate.NewWithSourceInstance("iofs", src, "pgx5://app@db/app")
//	err := mg.Up()
//
// then open the store with SkipMigrations.
func ExampleMigrationsFor() {
	fsys, err := jobs.MigrationsFor("postgres", jobs.GolangMigrate)
	if err != nil {
		log.Fatal(err)
	}
	names, _ := fs.Glob(fsys, "*.sql")
	fmt.Println(names[0])
	// Output:
	// 0001_init.up.sql
}
