package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
)

// nested returns a number inside depth arrays: [[…[1]…]].
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// unstorableResults are results that encoding/json's Valid accepts, or that
// one of the databases would refuse or store as something else. Each must be
// refused before anything is written.
var unstorableResults = []struct{ name, result string }{
	{"invalid UTF-8 in a string", "{\"summary\":\"\xff\"}"},
	{"invalid UTF-8 in a key", "{\"summary\":\"x\",\"\xc3\":1}"},
	{"truncated UTF-8 sequence", "{\"summary\":\"caf\xc3\"}"},
	{"UTF-8 encoded surrogate", "{\"summary\":\"\xed\xa0\x80\"}"},
	{"lone surrogate escape", `{"summary":"\ud800"}`},
	{"raw NUL in a string", "{\"summary\":\"a\x00b\"}"},
	{"raw NUL after the value", "{\"summary\":\"x\"}\x00"},
	{"nested past the limit of 128", `{"summary":"x","deep":` + nested(128) + `}`},
	{"nested past SQLite's JSON limit", `{"summary":"x","deep":` + nested(1500) + `}`},
	{"duplicate key", `{"summary":"x","summary":"y"}`},
	{"two values", `{"summary":"x"} {"summary":"y"}`},
	{"not JSON", `<html>OK</html>`},
	{"over MaxResultBytes", `{"summary":"` + strings.Repeat("x", 5000) + `"}`},
}

// storableResults are results at the edges of what is accepted. Each is
// stored as given, byte for byte: results are checked, not canonicalized.
var storableResults = []struct{ name, result string }{
	{"key order and spacing kept", "{ \"summary\" : \"x\",\n \"b\": 1, \"a\": [true, null] }"},
	{"escaped NUL", `{"summary":"a\u0000b"}`},
	{"surrogate pair escape and UTF-8", `{"summary":"\ud83d\ude00 é 日本 🙂"}`},
	{"nested to the limit of 128", `{"summary":"x","deep":` + nested(127) + `}`},
	{"number beyond float64", `{"summary":"x","n":1e400,"m":-0.0e-0}`},
	{"escapes of every kind", `{"summary":"\"\\\/\b\f\n\r\t\u00e9"}`},
}

// Complete refuses a result that a database cannot hold as it is with
// ErrInvalidInput naming the Result, and writes nothing: the attempt stays
// running, the job keeps its version, and a good result still completes
// it. A result at the edge of what is accepted is stored byte for byte.
func TestCompleteRefusesUnstorableResultWritingNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		s, _ := sc.Open(t)
		m, err := jobs.New(s, jobs.Options{Logger: discard, MaxResultBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		start := func(t *testing.T, key string) (jobs.Job, jobs.Attempt) {
			t.Helper()
			j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if a, err = m.MarkRunning(ctx, a.ID, "ref-"+key); err != nil {
				t.Fatal(err)
			}
			if j, err = m.Get(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			return j, a
		}
		for _, tt := range unstorableResults {
			j, a := start(t, "bad "+tt.name)
			_, err := m.Complete(ctx, a.ID, json.RawMessage(tt.result))
			var in *jobs.InputError
			if !errors.As(err, &in) || in.Field != "Result" || !errors.Is(err, jobs.ErrInvalidInput) {
				t.Errorf("%s: Complete: %v; want an *InputError for the Result", tt.name, err)
				continue
			}
			if errors.Is(err, jobs.ErrStorage) || len(in.Problem) > 200 {
				t.Errorf("%s: problem %q", tt.name, in.Problem)
			}
			gotJ, errJ := m.Get(ctx, j.ID)
			gotA, errA := m.Attempt(ctx, a.ID)
			if errJ != nil || errA != nil || gotJ.Version != j.Version || gotJ.State != jobs.JobRunning || gotJ.Result != nil ||
				gotA.State != jobs.AttemptRunning || gotA.Reason != "" {
				t.Errorf("%s: refused result changed the store: job %s v%d %s, attempt %s %q (%v, %v)",
					tt.name, gotJ.State, gotJ.Version, gotJ.Result, gotA.State, gotA.Reason, errJ, errA)
			}
			// The attempt is not wedged: its real result completes it.
			if done, err := m.Complete(ctx, a.ID, json.RawMessage(`{"summary":"fixed"}`)); err != nil || done.State != jobs.JobSucceeded {
				t.Errorf("%s: a good result after the refused one: %v (%s)", tt.name, err, done.State)
			}
		}
		for _, tt := range storableResults {
			j, a := start(t, "good "+tt.name)
			done, err := m.Complete(ctx, a.ID, json.RawMessage(tt.result))
			if err != nil {
				t.Errorf("%s: Complete: %v", tt.name, err)
				continue
			}
			if got, err := m.Get(ctx, j.ID); err != nil || string(got.Result) != tt.result || string(done.Result) != tt.result {
				t.Errorf("%s: stored %q, returned %q, want %q (%v)", tt.name, got.Result, done.Result, tt.result, err)
			}
		}
	})
}

// VerifyProvider checks a round trip's output as Complete checks a result:
// output that no database could store as it is fails the verification,
// however the contract reads it, and does not make the provider eligible
// for failover.
func TestVerifyProviderFailsOnUnstorableOutput(t *testing.T) {
	forEachStore(t, func(t *testing.T, sc storeCase) {
		f := newFixture(t, sc)
		for _, out := range []string{"{\"summary\":\"\xff\"}", `{"summary":"x","deep":` + nested(200) + `}`, `{"summary":"\udc00"}`} {
			v := f.verify(t, "beta", out)
			if v.Passed || !strings.Contains(v.Reason, "invalid Result") {
				t.Errorf("verification with output %.40q: passed=%v reason %q; want it failed as an invalid result", out, v.Passed, v.Reason)
			}
			j := f.submit(t, "k", "alpha")
			if err := f.m.CheckFailover(context.Background(), j, "beta"); !errors.Is(err, jobs.ErrProviderUnverified) {
				t.Errorf("failover to beta after output %.40q: %v; want ErrProviderUnverified", out, err)
			}
		}
	})
}
