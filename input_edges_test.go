package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
)

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

// A purge cutoff outside the years 1 to 9999 is invalid input on both
// stores, deleting nothing: PostgreSQL would refuse it as a timestamp out of
// range, and on SQLite a cutoff past the year 294246 would overflow into the
// past and silently purge nothing. Cutoffs at the edges of the range work.
func TestPurgeRefusesCutoffOutsideSupportedYears(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		s, _ := sc.open(t)
		m, err := jobs.New(s, jobs.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.CancelJob(ctx, j.ID, "done"); err != nil {
			t.Fatal(err)
		}
		for _, cutoff := range []time.Time{
			time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC),
		} {
			for _, dry := range []bool{true, false} {
				_, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: cutoff, DryRun: dry})
				var in *jobs.InputError
				if !errors.As(err, &in) || in.Field != "OlderThan" {
					t.Errorf("Purge before %v (dry run %v): %v; want an *InputError for OlderThan", cutoff, dry, err)
				}
			}
		}
		if _, err := m.Get(ctx, j.ID); err != nil {
			t.Fatalf("the closed job after refused purges: %v", err)
		}
		if r, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}); err != nil || r.Jobs != 0 {
			t.Errorf("Purge before the year 1: %v, %d jobs; want none purged", err, r.Jobs)
		}
		if r, err := m.Purge(ctx, jobs.PurgeOptions{OlderThan: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}); err != nil || r.Jobs != 1 {
			t.Errorf("Purge before the year 9999 ends: %v, %d jobs; want the closed one purged", err, r.Jobs)
		}
	})
}
