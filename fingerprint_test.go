package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// TestCanonicalizeGolden checks testdata/canonical/NAME.in.json against
// NAME.want.json.
func TestCanonicalizeGolden(t *testing.T) {
	t.Parallel()
	ins, err := filepath.Glob("testdata/canonical/*.in.json")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(in, ".in.json") + ".want.json")
			if err != nil {
				t.Fatal(err)
			}
			got, err := jobs.Canonicalize(src)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("Canonicalize(%s)\n got %s\nwant %s", src, got, want)
			}
			again, err := jobs.Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("canonical form is not a fixed point: %s -> %s, %v", got, again, err)
			}
		})
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":                   ``,
		"bare word":               `hello`,
		"unquoted key":            `{a:1}`,
		"trailing comma":          `[1,2,]`,
		"trailing data":           `{} []`,
		"duplicate key":           `{"a":1,"b":2,"a":3}`,
		"duplicate via escape":    `{"a":1,"\u0061":2}`,
		"leading zero":            `01`,
		"bare minus":              `-`,
		"dot without digits":      `1.`,
		"exponent without digits": `1e`,
		"control character":       "\"a\tb\"",
		"invalid escape":          `"\x"`,
		"lone surrogate":          `"\ud800"`,
		"invalid UTF-8":           "\"\xff\"",
		"unterminated string":     `"abc`,
		"unterminated array":      `[1,2`,
		"too deep":                strings.Repeat("[", 200) + strings.Repeat("]", 200),
		"NaN":                     `NaN`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got, err := jobs.Canonicalize([]byte(in)); err == nil {
				t.Errorf("Canonicalize(%q) = %s, want an error", in, got)
			}
		})
	}
}

// The nesting limit is what the documentation says, 128 objects and
// arrays inside one another, whatever sits innermost.
func TestCanonicalizeNestsUpTo128Levels(t *testing.T) {
	t.Parallel()
	arrays := func(n int, inner string) string { return strings.Repeat("[", n) + inner + strings.Repeat("]", n) }
	objects := func(n int, inner string) string { return strings.Repeat(`{"a":`, n) + inner + strings.Repeat("}", n) }
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"128 arrays, empty", arrays(128, ""), true},
		{"128 arrays around a number", arrays(128, "1"), true},
		{"127 objects around an empty array", objects(127, "[]"), true},
		{"128 objects around a string", objects(128, `"x"`), true},
		{"129 arrays, empty", arrays(129, ""), false},
		{"129 arrays around a number", arrays(129, "1"), false},
		{"128 objects around an empty array", objects(128, "[]"), false},
		{"129 objects around a string", objects(129, `"x"`), false},
		{"64 of each, then one more", arrays(64, objects(64, "[]")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := jobs.Canonicalize([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Errorf("Canonicalize = %v; want accepted %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "nested deeper than 128") {
				t.Errorf("error %q does not name the limit", err)
			}
		})
	}
}

// TestFingerprintIsStable pins fingerprints to values computed by earlier
// releases: jobs stored with them must still match their replays after an
// upgrade, or every replay would become a conflict.
func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, provider, params, want string
	}{
		{"charge", "psp", `{"b": [1, 2.50, "x\u00e9\n"], "a": {"z": null, "y": true}}`,
			"af0c4e3cc913ee748029e000178f166569f7a70ccb367fb7afac14df00049349"},
		{"", "", `null`, "d296cc41e6d7fd1ae24a9c7024b33647da06851af896de7f7471234cd958c09e"},
	} {
		c, err := jobs.Canonicalize([]byte(tc.params))
		if err != nil {
			t.Fatal(err)
		}
		if got := jobs.Fingerprint(tc.kind, tc.provider, c); got != tc.want {
			t.Errorf("Fingerprint(%q, %q, %s) = %s, want %s", tc.kind, tc.provider, c, got, tc.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	canon := func(s string) []byte {
		c, err := jobs.Canonicalize([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := jobs.Fingerprint("charge", "acme", canon(`{"amount":1200,"currency":"eur"}`))
	if len(base) != 64 {
		t.Fatalf("fingerprint %q is not 64 hex digits", base)
	}
	for _, tc := range []struct {
		name           string
		kind, provider string
		params         string
		same           bool
	}{
		{"key order", "charge", "acme", `{"currency":"eur","amount":1200}`, true},
		{"whitespace", "charge", "acme", " {\n\"amount\" : 1200 , \"currency\":\"eur\"}\n", true},
		{"escaped letter", "charge", "acme", `{"amount":1200,"currency":"\u0065ur"}`, true},
		{"value", "charge", "acme", `{"amount":1201,"currency":"eur"}`, false},
		{"number literal", "charge", "acme", `{"amount":1200.0,"currency":"eur"}`, false},
		{"type", "charge", "acme", `{"amount":"1200","currency":"eur"}`, false},
		{"kind", "refund", "acme", `{"amount":1200,"currency":"eur"}`, false},
		{"provider", "charge", "other", `{"amount":1200,"currency":"eur"}`, false},
		// Length prefixes keep field boundaries: ("ab","c") is not ("a","bc").
		{"shifted boundary", "chargeacm", "e", `{"amount":1200,"currency":"eur"}`, false},
	} {
		got := jobs.Fingerprint(tc.kind, tc.provider, canon(tc.params))
		if (got == base) != tc.same {
			t.Errorf("%s: same fingerprint = %v, want %v", tc.name, got == base, tc.same)
		}
	}
}

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
			for _, sc := range testdb.StoreCases() {
				store, _ := sc.Open(t)
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
						t.Fatalf("%s: %s, %v, %v; want job %s with the first params", sc.Name, got.ID, created, err, j.ID)
					}
				case !errors.Is(err, tc.wantErr):
					t.Fatalf("%s: %v, want %v", sc.Name, err, tc.wantErr)
				}
				if n := len(listJobs(t, store)); n != 1 {
					t.Fatalf("%s: %d jobs, want the first one only", sc.Name, n)
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
