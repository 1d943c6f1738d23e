package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

type chargeParams struct {
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

type chargeResult struct {
	Charge string `json:"charge"`
	Status string `json:"status"`
}

var charge = jobs.NewKind[chargeParams, chargeResult]("charge")

// TestKindRoundTrip submits typed params, completes with a typed result and
// reads both back, on both stores.
func TestKindRoundTrip(t *testing.T) {
	t.Parallel()
	for _, sc := range testdb.StoreCases() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store, _ := sc.Open(t)
			m := jobstest.NewManager(t, store, jobs.Options{Contracts: map[string]jobs.Contract{
				charge.Name(): charge.Contract("v1", nil),
			}})
			req := jobs.Request[chargeParams]{Owner: "u", Key: "k", Provider: "psp", Params: chargeParams{1200, "eur"}}
			j, created, err := charge.Submit(ctx, m, req)
			if err != nil || !created || j.Kind != "charge" {
				t.Fatalf("Submit: %+v, %v, %v", j, created, err)
			}
			if again, created, err := charge.Submit(ctx, m, req); err != nil || created || again.ID != j.ID {
				t.Fatalf("replayed Submit: %s, %v, %v; want %s, false", again.ID, created, err, j.ID)
			}
			if p, err := charge.Params(j); err != nil || p != req.Params {
				t.Fatalf("Params: %+v, %v", p, err)
			}
			if _, err := charge.Result(j); err == nil {
				t.Fatal("Result of a pending job: no error")
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			j, err = charge.Complete(ctx, m, a.ID, chargeResult{"ch_1", "paid"})
			if err != nil {
				t.Fatal(err)
			}
			if r, err := charge.Result(j); err != nil || r != (chargeResult{"ch_1", "paid"}) {
				t.Fatalf("Result: %+v, %v", r, err)
			}
		})
	}
}

// TestKindDecodesStrictly checks that a result or params with a field the
// type lacks, or data after the value, is an error, and that the Kind's
// contract therefore keeps such a result from completing a job.
func TestKindDecodesStrictly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result string
		ok     bool
	}{
		{"exact", `{"charge":"ch_1","status":"paid"}`, true},
		{"missing field", `{"charge":"ch_1"}`, true},
		{"unknown field", `{"charge":"ch_1","status":"paid","refund":true}`, false},
		{"wrong type", `{"charge":1,"status":"paid"}`, false},
		{"not an object", `["ch_1"]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := charge.Contract("v1", nil).Validate(json.RawMessage(tc.result))
			if (err == nil) != tc.ok {
				t.Fatalf("contract on %s: %v, want ok=%v", tc.result, err, tc.ok)
			}
			j := jobs.Job{ID: "job_1", Kind: "charge", State: jobs.JobSucceeded, Result: json.RawMessage(tc.result)}
			if _, err := charge.Result(j); (err == nil) != tc.ok {
				t.Fatalf("Result of %s: %v, want ok=%v", tc.result, err, tc.ok)
			}
		})
	}
	other := jobs.Job{ID: "job_2", Kind: "refund", State: jobs.JobSucceeded, Result: json.RawMessage(`{}`)}
	if _, err := charge.Result(other); err == nil {
		t.Error("Result of a job of another kind: no error")
	}
	if _, err := charge.Params(jobs.Job{ID: "job_3", Kind: "charge", Params: json.RawMessage(`{"amount":1}{}`)}); err == nil {
		t.Error("Params with data after the value: no error")
	}
	failed := jobs.Job{ID: "job_4", Kind: "charge", State: jobs.JobFailed}
	if _, err := charge.Result(failed); !errors.Is(err, jobs.ErrJobClosed) {
		t.Errorf("Result of a failed job: %v, want ErrJobClosed", err)
	}
}

// TestKindContractRefusesOffTypeResult runs the contract through Complete:
// a provider's result with a field the kind does not know fails the
// attempt and never reaches the job.
func TestKindContractRefusesOffTypeResult(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := jobstest.NewManager(t, testdb.NewSQLite(t), jobs.Options{Contracts: map[string]jobs.Contract{
		charge.Name(): charge.Contract("v1", func(r chargeResult) error {
			if r.Charge == "" {
				return errors.New("no charge ID")
			}
			return nil
		}),
	}})
	j, _, err := charge.Submit(ctx, m, jobs.Request[chargeParams]{Owner: "u", Key: "k", Provider: "psp", Params: chargeParams{1, "eur"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"charge":"ch_1","extra":1}`, `{"status":"paid"}`} {
		a, err := m.StartAttempt(ctx, j.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Complete(ctx, a.ID, json.RawMessage(bad)); !errors.Is(err, jobs.ErrContractViolation) {
			t.Fatalf("Complete with %s: %v, want ErrContractViolation", bad, err)
		}
	}
	if got, _ := m.Get(ctx, j.ID); got.State != jobs.JobRunning || got.Result != nil {
		t.Fatalf("job after off-type results: %s, result %s", got.State, got.Result)
	}
}

// ExampleKind submits a typed charge, completes it with a typed receipt and
// reads the receipt back.
func ExampleKind() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := jobs.OpenSQLite(ctx, filepath.Join(dir, "jobs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	type Params struct {
		Amount   int    `json:"amount"`
		Currency string `json:"currency"`
	}
	type Receipt struct {
		Charge string `json:"charge"`
	}
	charge := jobs.NewKind[Params, Receipt]("charge")
	m, err := jobs.New(store, jobs.Options{Contracts: map[string]jobs.Contract{charge.Name(): charge.Contract("v1", nil)}})
	if err != nil {
		log.Fatal(err)
	}

	job, _, err := charge.Submit(ctx, m, jobs.Request[Params]{Owner: "user-7", Key: "order-42", Provider: "psp",
		Params: Params{Amount: 1200, Currency: "eur"}})
	if err != nil {
		log.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, job.ID, "")
	if err != nil {
		log.Fatal(err)
	}
	job, err = charge.Complete(ctx, m, a.ID, Receipt{Charge: "ch_9Zt7"})
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := charge.Result(job)
	fmt.Println(job.State, receipt.Charge, err)
	// Output: succeeded ch_9Zt7 <nil>
}
