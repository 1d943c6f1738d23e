package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// TestIntentFields checks Submit with IntentFields on both stores: only the
// named members of the params decide whether a repeat is the same intent,
// the names themselves are part of it, and bad use is refused with nothing
// written.
func TestIntentFields(t *testing.T) {
	t.Parallel()
	first := `{"amount":1200,"currency":"eur","trace":"t-1"}`
	intent := []string{"currency", "amount"}
	for _, tc := range []struct {
		name    string
		params  string
		fields  []string
		replay  bool  // the first job comes back, unchanged
		wantErr error // otherwise
	}{
		{"same request", first, intent, true, nil},
		{"other trace", `{"trace":"t-2","amount":1200,"currency":"eur"}`, intent, true, nil},
		{"trace missing", `{"amount":1200,"currency":"eur"}`, intent, true, nil},
		{"fields in another order, repeated", first, []string{"amount", "currency", "amount"}, true, nil},
		{"other amount", `{"amount":1300,"currency":"eur","trace":"t-1"}`, intent, false, jobs.ErrKeyConflict},
		{"amount missing", `{"currency":"eur","trace":"t-1"}`, intent, false, jobs.ErrKeyConflict},
		{"amount null", `{"amount":null,"currency":"eur","trace":"t-1"}`, intent, false, jobs.ErrKeyConflict},
		{"other fields", first, []string{"amount"}, false, jobs.ErrKeyConflict},
		{"no fields", first, nil, false, jobs.ErrKeyConflict},
		{"params not an object", `[1200,"eur"]`, intent, false, jobs.ErrInvalidInput},
		{"empty field name", first, []string{""}, false, jobs.ErrInvalidInput},
		{"field name not UTF-8", first, []string{"\xff"}, false, jobs.ErrInvalidInput},
		{"too many fields", first, strings.Fields(strings.Repeat("f ", 65)), false, jobs.ErrInvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range storeCases() {
				store, _ := sc.open(t)
				ctx := context.Background()
				m := jobstest.NewManager(t, store, jobs.Options{})
				req := jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "charge", Provider: "psp", IntentFields: intent,
					Params: json.RawMessage(first)}
				j, _, err := m.Submit(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				req.Params, req.IntentFields = json.RawMessage(tc.params), tc.fields
				if tc.wantErr == jobs.ErrInvalidInput {
					req.Key = "other-key" // a key of its own, so that nothing else can answer
				}
				got, created, err := m.Submit(ctx, req)
				switch {
				case tc.replay:
					if err != nil || created || got.ID != j.ID || string(got.Params) != string(j.Params) {
						t.Fatalf("%s: %s, %v, %v; want job %s with the first params", sc.name, got.ID, created, err, j.ID)
					}
				case !errors.Is(err, tc.wantErr):
					t.Fatalf("%s: %v, want %v", sc.name, err, tc.wantErr)
				}
				if n := len(listJobs(t, store)); n != 1 {
					t.Fatalf("%s: %d jobs, want the first one only", sc.name, n)
				}
			}
		})
	}
}

// listJobs returns every job of s.
func listJobs(t *testing.T, s testdb.Store) []jobs.Job {
	t.Helper()
	js, err := s.ListJobs(context.Background(), jobs.JobQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return js
}
