package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

// summaryContract is a contract for kind "summarize" at version.
var summaryContract = func(version string) map[string]jobs.Contract {
	return map[string]jobs.Contract{"summarize": {Version: version, Validate: func(r json.RawMessage) error {
		var v struct {
			Summary string `json:"summary"`
		}
		if err := json.Unmarshal(r, &v); err != nil || v.Summary == "" {
			return errors.New("no summary")
		}
		return nil
	}}}
}

// testVerification proves RecordVerification and Verifications through
// Manager.VerifyProvider and the failover rule: only a provider with a
// passing, unexpired verification under the kind's current contract version
// may take a failover attempt, and the latest verification decides.
func testVerification(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore, func(o *jobs.Options) { o.Contracts = summaryContract("v1") })
	good := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"summary":"ok"}`), nil }
	bad := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"text":"ok"}`), nil }
	newJob := func(m *jobs.Manager) jobs.Job {
		j, _, err := m.Submit(e.ctx, jobs.SubmitRequest{Owner: "o", Key: "k-" + randomHex(4), Kind: "summarize",
			Provider: "primary", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	failover := func(m *jobs.Manager) error {
		_, err := m.StartAttempt(e.ctx, newJob(m).ID, "fallback")
		return err
	}

	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover to a never-verified provider = %v, want ErrProviderUnverified", err)
	}
	if _, err := e.m.StartAttempt(e.ctx, newJob(e.m).ID, "primary"); err != nil {
		t.Fatalf("the job's own provider needs no verification: %v", err)
	}
	v, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", good, jobs.ValidFor(time.Hour))
	if err != nil || !v.Passed || v.ContractVersion != "v1" {
		t.Fatalf("VerifyProvider = %+v, %v; want a pass at v1", v, err)
	}
	if err := failover(e.m); err != nil {
		t.Fatalf("failover after a passing verification = %v", err)
	}

	e.clock.Advance(2 * time.Hour)
	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover after the verification expired = %v, want ErrProviderUnverified", err)
	}
	if _, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", good); err != nil {
		t.Fatal(err)
	}
	v2, err := jobs.New(e.store, jobs.Options{Clock: e.clock, Logger: discardLogger(), Contracts: summaryContract("v2")})
	if err != nil {
		t.Fatal(err)
	}
	if err := failover(v2); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover under a new contract version = %v, want ErrProviderUnverified", err)
	}
	e.clock.Advance(time.Second)
	if v, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", bad); err != nil || v.Passed {
		t.Fatalf("VerifyProvider with off-contract output = %+v, %v; want a recorded failure", v, err)
	}
	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover after a failed verification = %v, want ErrProviderUnverified (the latest decides)", err)
	}
	list, err := e.m.Verifications(e.ctx, jobs.VerificationFilter{Provider: "fallback", Kind: "summarize"})
	if err != nil || len(list) != 3 {
		t.Fatalf("Verifications = %d, %v; want 3", len(list), err)
	}
	if list[0].Passed || !list[1].Passed {
		t.Errorf("Verifications not newest first: %+v", list)
	}
}
