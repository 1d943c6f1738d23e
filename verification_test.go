package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobstest"
)

func TestVerifyProvider(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()

		pass := f.verify(t, "beta", `{"summary":"fine"}`, jobs.ValidFor(time.Hour))
		if !pass.Passed || pass.Reason != "" || pass.ContractVersion != "v1" || pass.Kind != kindSummarize ||
			!pass.VerifiedAt.Equal(f.clock.Now()) || !pass.ExpiresAt.Equal(f.clock.Now().Add(time.Hour)) {
			t.Errorf("passing verification = %+v", pass)
		}
		f.clock.Advance(time.Second)
		fail := f.verify(t, "gamma", `{"answer":"fine"}`)
		if fail.Passed || !strings.Contains(fail.Reason, "contract v1 violated") || !fail.ExpiresAt.IsZero() {
			t.Errorf("failing verification = %+v", fail)
		}
		f.clock.Advance(time.Second)
		broken, err := f.m.VerifyProvider(ctx, "delta", kindSummarize, func(context.Context) (json.RawMessage, error) {
			return nil, errors.New("HTTP 503")
		})
		if err != nil || broken.Passed || !strings.Contains(broken.Reason, "HTTP 503") {
			t.Errorf("round trip error: %+v, %v", broken, err)
		}
		f.clock.Advance(time.Second)
		empty := f.verify(t, "epsilon", ``)
		if empty.Passed {
			t.Errorf("an empty body passed verification")
		}

		all, err := f.m.Verifications(ctx, jobs.VerificationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 4 || all[0].ID != empty.ID || all[3].ID != pass.ID {
			t.Errorf("Verifications = %d, want 4 newest first", len(all))
		}
		if got := all[3]; got != pass {
			t.Errorf("stored %+v, want %+v", got, pass)
		}
		only, err := f.m.Verifications(ctx, jobs.VerificationFilter{Provider: "gamma", Kind: kindSummarize, ContractVersion: "v1"})
		if err != nil || len(only) != 1 || only[0].ID != fail.ID {
			t.Errorf("filtered Verifications = %v, %v", only, err)
		}
		if got, _ := f.m.Verifications(ctx, jobs.VerificationFilter{ContractVersion: "v2"}); len(got) != 0 {
			t.Errorf("v2 filter matched %d", len(got))
		}

		// Refused before anything runs: no contract, bad names, nil round trip.
		ran := false
		rt := func(context.Context) (json.RawMessage, error) { ran = true; return json.RawMessage(`{}`), nil }
		for _, bad := range []struct{ provider, kind string }{{"beta", "no-contract"}, {"", kindSummarize}, {"beta", ""}} {
			if _, err := f.m.VerifyProvider(ctx, bad.provider, bad.kind, rt); !errors.Is(err, jobs.ErrInvalidInput) {
				t.Errorf("VerifyProvider(%q, %q) = %v, want ErrInvalidInput", bad.provider, bad.kind, err)
			}
		}
		if _, err := f.m.VerifyProvider(ctx, "beta", kindSummarize, nil); !errors.Is(err, jobs.ErrInvalidInput) {
			t.Errorf("nil round trip: %v", err)
		}
		if ran {
			t.Error("round trip ran for refused input")
		}

		// A caller that gives up during the round trip records nothing.
		cctx, cancel := context.WithCancel(ctx)
		_, err = f.m.VerifyProvider(cctx, "zeta", kindSummarize, func(context.Context) (json.RawMessage, error) {
			cancel()
			return json.RawMessage(`{"summary":"late"}`), nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled verification = %v", err)
		}
		if got, _ := f.m.Verifications(ctx, jobs.VerificationFilter{Provider: "zeta"}); len(got) != 0 {
			t.Errorf("cancelled verification was recorded: %v", got)
		}
		if n := f.ev.Count(jobs.EventProviderVerified); n != 1 {
			t.Errorf("%d provider verified events, want 1", n)
		}
	})
}

func TestFailoverNeedsVerification(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		ctx := context.Background()
		start := func(key, provider string) error {
			t.Helper()
			j := f.submit(t, key, "alpha")
			_, err := f.m.StartAttempt(ctx, j.ID, provider)
			if err == nil {
				return nil
			}
			if as := f.attempts(t, j.ID); len(as) != 0 {
				t.Errorf("refused attempt was written: %v", states(as))
			}
			return err
		}
		unverified := func(name, key, provider, wantReason string) {
			t.Helper()
			err := start(key, provider)
			var pe *jobs.ProviderUnverifiedError
			if !errors.As(err, &pe) || !errors.Is(err, jobs.ErrProviderUnverified) {
				t.Fatalf("%s: StartAttempt(%s) = %v, want ErrProviderUnverified", name, provider, err)
			}
			if pe.Provider != provider || pe.Kind != kindSummarize || pe.ContractVersion != "v1" || !strings.Contains(pe.Reason, wantReason) {
				t.Errorf("%s: details %+v, want reason containing %q", name, pe, wantReason)
			}
		}

		unverified("never verified", "k1", "beta", "never verified")
		if err := start("k2", "alpha"); err != nil {
			t.Errorf("the target provider needs no verification: %v", err)
		}
		if err := start("k2b", ""); err != nil {
			t.Errorf("the default provider needs no verification: %v", err)
		}

		f.verify(t, "beta", `{"summary":"ok"}`, jobs.ValidFor(time.Minute))
		if err := start("k3", "beta"); err != nil {
			t.Errorf("verified fallback refused: %v", err)
		}
		f.clock.Advance(time.Minute)
		unverified("expired", "k4", "beta", "expired")

		f.verify(t, "beta", `{"summary":"ok"}`)
		f.clock.Advance(time.Second)
		f.verify(t, "beta", `{"summary":""}`) // the latest verification decides
		unverified("failed later", "k5", "beta", "failed")
		f.clock.Advance(time.Second)
		f.verify(t, "beta", `{"summary":"ok again"}`)
		if err := start("k6", "beta"); err != nil {
			t.Errorf("re-verified fallback refused: %v", err)
		}

		// A new contract version invalidates verifications of the old one.
		opts := f.opts
		opts.Contracts = map[string]jobs.Contract{kindSummarize: summaryContract("v2")}
		m2 := jobstest.NewManager(t, f.store, opts)
		j := f.submit(t, "k7", "alpha")
		_, err := m2.StartAttempt(ctx, j.ID, "beta")
		var pe *jobs.ProviderUnverifiedError
		if !errors.As(err, &pe) || pe.ContractVersion != "v2" {
			t.Fatalf("after a contract change: %v, want ErrProviderUnverified at v2", err)
		}
		if _, err := m2.VerifyProvider(ctx, "beta", kindSummarize, func(context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"summary":"ok"}`), nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := m2.StartAttempt(ctx, j.ID, "beta"); err != nil {
			t.Errorf("verified at v2, still refused: %v", err)
		}

		// Kinds without a contract fail over as before.
		tj, _, err := f.m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k8", Kind: "translate", Provider: "alpha", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.m.StartAttempt(ctx, tj.ID, "beta"); err != nil {
			t.Errorf("kind without a contract: %v", err)
		}
		if n := f.ev.Count(jobs.EventAttemptRefused); n != 4 {
			t.Errorf("%d refusal events, want 4", n)
		}
		f.checkInvariants(t)
	})
}

// CheckFailover refuses a provider name that StartAttempt would refuse as
// invalid input, on both stores, instead of asking the store for its
// verifications (which PostgreSQL cannot even compare with such a name).
func TestCheckFailoverRefusesInvalidProviderName(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		j := f.submit(t, "k", "alpha")
		for _, provider := range []string{"\xff", "a\x00b", "be\xc3", string(make([]byte, 256))} {
			err := f.m.CheckFailover(context.Background(), j, provider)
			var in *jobs.InputError
			if !errors.As(err, &in) || in.Field != "Provider" {
				t.Errorf("CheckFailover(%.20q): %v; want an *InputError for the Provider", provider, err)
			}
		}
		if err := f.m.CheckFailover(context.Background(), j, "beta"); !errors.Is(err, jobs.ErrProviderUnverified) {
			t.Errorf("CheckFailover(beta): %v; want ErrProviderUnverified", err)
		}
	})
}
