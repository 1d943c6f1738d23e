package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
)

func TestCompleteChecksContract(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		tests := []struct {
			name    string
			kind    string
			result  string
			wantErr error
		}{
			{"valid summary", kindSummarize, `{"summary":"short"}`, nil},
			{"empty object", kindSummarize, `{}`, jobs.ErrContractViolation},
			{"null", kindSummarize, `null`, jobs.ErrContractViolation},
			{"empty summary", kindSummarize, `{"summary":""}`, jobs.ErrContractViolation},
			{"wrong type", kindSummarize, `{"summary":42}`, jobs.ErrContractViolation},
			{"hallucinated key", kindSummarize, `{"summary":"x","confidence":0.9}`, jobs.ErrContractViolation},
			{"kind without contract", "translate", `{}`, nil},
		}
		for i, tt := range tests {
			j, _, err := f.m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k" + string(rune('a'+i)), Kind: tt.kind,
				Provider: "alpha", Params: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			a, err := f.m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			before := f.ev.Count(jobs.EventContractViolation)
			got, err := f.m.Complete(ctx, a.ID, json.RawMessage(tt.result))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("%s: Complete error = %v, want %v", tt.name, err, tt.wantErr)
			}
			stored, _ := f.m.Get(ctx, j.ID)
			att, _ := f.m.Attempt(ctx, a.ID)
			if tt.wantErr == nil {
				if got.State != jobs.JobSucceeded || string(stored.Result) != tt.result {
					t.Errorf("%s: job %s with result %s, want succeeded with %s", tt.name, stored.State, stored.Result, tt.result)
				}
				continue
			}
			var cv *jobs.ContractViolationError
			if !errors.As(err, &cv) || cv.AttemptID != a.ID || cv.JobID != j.ID || cv.Kind != kindSummarize ||
				cv.ContractVersion != "v1" || cv.Provider != "alpha" || cv.Reason == "" {
				t.Errorf("%s: error details %+v", tt.name, cv)
			}
			if stored.State != jobs.JobRunning || stored.Result != nil || stored.CompletedBy != "" {
				t.Errorf("%s: result reached the job: %s %s %q", tt.name, stored.State, stored.Result, stored.CompletedBy)
			}
			if att.State != jobs.AttemptFailed || !strings.Contains(att.Reason, "contract v1 violated") {
				t.Errorf("%s: attempt %s (%q), want failed with the contract's reason", tt.name, att.State, att.Reason)
			}
			if n := f.ev.Count(jobs.EventContractViolation) - before; n != 1 {
				t.Errorf("%s: %d contract violation events, want 1", tt.name, n)
			}
			// A retried call gets the same answer and changes nothing.
			if _, err := f.m.Complete(ctx, a.ID, json.RawMessage(tt.result)); !errors.Is(err, jobs.ErrContractViolation) {
				t.Errorf("%s: retried Complete = %v", tt.name, err)
			}
			// The job stays open for another attempt.
			b, err := f.m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatalf("%s: next attempt: %v", tt.name, err)
			}
			if _, err := f.m.Complete(ctx, b.ID, json.RawMessage(`{"summary":"ok"}`)); err != nil {
				t.Fatalf("%s: valid result after a violation: %v", tt.name, err)
			}
		}
		f.checkInvariants(t)
	})
}
