package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intentjobs/jobs"
)

// hostileKeys are keys that would do harm if they ever became SQL text or a
// LIKE pattern. Each must be stored and found as itself, and only itself.
var hostileKeys = []string{
	"'; DROP TABLE jobs; --",
	"' OR '1'='1",
	"\" OR \"\"=\"",
	"%", "_", "%%", "a%", "a_", "%a%", "[a-z]*", "\\", "\\\\", "\\%", "\\'", "''", "`",
	"$1", "?", ":name", "@p1", "/* */", "--", ";",
	"key\nwith\r\nnewlines\t",
	"\u00e9\u00e9", "e\u0301e\u0301", // the same text, composed and decomposed: two keys
	"\U0001F600", "\u202e reversed", "\ufeffbom",
	"K", "k", // case matters
	"k ", " k", // and spaces
	strings.Repeat("x", 255),
}

// TestHostileKeys stores a job under every hostile key and checks that
// each reads back as itself, that no key matches another, and that a
// replay returns the same job.
func TestHostileKeys(t *testing.T) {
	t.Parallel()
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := d.open(t)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]string{}
			for _, key := range hostileKeys {
				j, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: key, Key: key, Kind: key, Provider: key, Params: json.RawMessage(`{"k":` + mustJSON(key) + `}`)})
				if err != nil || !created {
					t.Fatalf("submit %q: %v created=%v", key, err, created)
				}
				ids[key] = j.ID
			}
			for _, key := range hostileKeys {
				j, err := m.GetByKey(ctx, key, key)
				if err != nil || j.ID != ids[key] || j.Key != key || j.Owner != key || j.Kind != key || j.Provider != key {
					t.Errorf("get %q: %+v (%v)", key, j, err)
				}
				again, created, err := m.Submit(ctx, jobs.SubmitRequest{Owner: key, Key: key, Kind: key, Provider: key, Params: json.RawMessage(`{"k":` + mustJSON(key) + `}`)})
				if err != nil || created || again.ID != ids[key] {
					t.Errorf("replay %q: %v created=%v", key, err, created)
				}
			}
			if n := countJobs(t, s); n != len(hostileKeys) {
				t.Fatalf("%d jobs stored for %d keys", n, len(hostileKeys))
			}
			assertInvariants(t, s)
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestHostileInputRejected sends input that no database column should
// hold: every call fails with ErrInvalidInput and writes nothing.
func TestHostileInputRejected(t *testing.T) {
	t.Parallel()
	mb := strings.Repeat("x", 1<<20)
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := d.open(t)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			good := jobs.SubmitRequest{Owner: "alice", Key: "k", Kind: "charge", Provider: "p1", Params: json.RawMessage(`{}`)}
			j, _, err := m.Submit(ctx, good)
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			with := func(f func(r *jobs.SubmitRequest)) jobs.SubmitRequest {
				r := good
				r.Key = "other"
				f(&r)
				return r
			}
			submits := map[string]jobs.SubmitRequest{
				"NUL in key":            with(func(r *jobs.SubmitRequest) { r.Key = "a\x00b" }),
				"NUL in owner":          with(func(r *jobs.SubmitRequest) { r.Owner = "\x00" }),
				"invalid UTF-8 key":     with(func(r *jobs.SubmitRequest) { r.Key = "\xff\xfe" }),
				"invalid UTF-8 kind":    with(func(r *jobs.SubmitRequest) { r.Kind = "a\xc3" }),
				"1 MB key":              with(func(r *jobs.SubmitRequest) { r.Key = mb }),
				"1 MB owner":            with(func(r *jobs.SubmitRequest) { r.Owner = mb }),
				"1 MB provider":         with(func(r *jobs.SubmitRequest) { r.Provider = mb }),
				"1 MB params":           with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`"` + mb + `"`) }),
				"params not JSON":       with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{'a':1}`) }),
				"params invalid UTF-8":  with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage("\"\xff\"") }),
				"params with raw NUL":   with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage("\"\x00\"") }),
				"params duplicate keys": with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{"a":1,"a":2}`) }),
				"params nested too deep": with(func(r *jobs.SubmitRequest) {
					r.Params = json.RawMessage(strings.Repeat("[", 200) + strings.Repeat("]", 200))
				}),
				"params trailing garbage": with(func(r *jobs.SubmitRequest) { r.Params = json.RawMessage(`{}; DROP TABLE jobs`) }),
				"empty key":               with(func(r *jobs.SubmitRequest) { r.Key = "" }),
			}
			for name, req := range submits {
				if _, _, err := m.Submit(ctx, req); !errors.Is(err, jobs.ErrInvalidInput) {
					t.Errorf("%s: %v, want ErrInvalidInput", name, err)
				}
			}
			calls := map[string]func() error{
				"reason 1 MB":           func() error { _, err := m.Fail(ctx, a.ID, mb); return err },
				"reason NUL":            func() error { _, err := m.Cancel(ctx, a.ID, "a\x00"); return err },
				"provider ref 1 MB":     func() error { _, err := m.MarkRunning(ctx, a.ID, mb); return err },
				"provider ref invalid":  func() error { _, err := m.MarkRunning(ctx, a.ID, "\xff"); return err },
				"result over the limit": func() error { _, err := m.Complete(ctx, a.ID, json.RawMessage(`"`+mb+mb+`"`)); return err },
				"result not JSON":       func() error { _, err := m.Complete(ctx, a.ID, json.RawMessage(`nope`)); return err },
				"attempt ID 1 MB":       func() error { _, err := m.Complete(ctx, mb, json.RawMessage(`1`)); return err },
				"job ID 1 MB":           func() error { _, err := m.CancelJob(ctx, mb, "x"); return err },
				"job reason invalid":    func() error { _, err := m.FailJob(ctx, j.ID, "\xff"); return err },
				"get by key NUL":        func() error { _, err := m.GetByKey(ctx, "alice", "\x00"); return err },
			}
			for name, call := range calls {
				if err := call(); !errors.Is(err, jobs.ErrInvalidInput) {
					t.Errorf("%s: %v, want ErrInvalidInput", name, err)
				}
			}
			if n := countJobs(t, s); n != 1 {
				t.Errorf("%d jobs after rejected input, want 1", n)
			}
			got, _ := m.Get(ctx, j.ID)
			att, _ := m.Attempt(ctx, a.ID)
			if got.Version != 1 || got.State != jobs.JobRunning || att.State != jobs.AttemptStarting || att.Reason != "" || att.ProviderRef != "" {
				t.Errorf("rejected input changed the job or attempt: %+v %+v", got, att)
			}
			// A 1 MB result is within the default limit and round-trips.
			big := json.RawMessage(`"` + mb[:1_000_000-2] + `"`)
			done, err := m.Complete(ctx, a.ID, big)
			if err != nil || len(done.Result) != len(big) {
				t.Fatalf("1 MB result: %v (%d bytes stored)", err, len(done.Result))
			}
			if back, _ := m.Get(ctx, j.ID); string(back.Result) != string(big) {
				t.Fatal("1 MB result did not round-trip")
			}
		})
	}
}

// TestTenantIsolation: owners A and B using the same key get separate
// jobs, and nothing B can call tells B anything about A's job.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	for _, d := range dialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := d.open(t)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			req := func(owner, params string) jobs.SubmitRequest {
				return jobs.SubmitRequest{Owner: owner, Key: "shared-key", Kind: "charge", Provider: "p1", Params: json.RawMessage(params)}
			}
			a, createdA, err := m.Submit(ctx, req("tenant-a", `{"amount":100}`))
			if err != nil || !createdA {
				t.Fatal(err)
			}
			// B uses A's key with another intent: not a conflict, a job of B's own.
			b, createdB, err := m.Submit(ctx, req("tenant-b", `{"amount":999}`))
			if err != nil || !createdB || b.ID == a.ID {
				t.Fatalf("B's submit with A's key: %v created=%v id %s (A's is %s)", err, createdB, b.ID, a.ID)
			}
			// B's own conflict names B's job, never A's.
			_, _, err = m.Submit(ctx, req("tenant-b", `{"amount":1}`))
			var kc *jobs.KeyConflictError
			if !errors.As(err, &kc) || kc.JobID != b.ID || strings.Contains(err.Error(), a.ID) {
				t.Fatalf("B's conflict: %v; must name only B's job %s", err, b.ID)
			}
			// The same intent as A's, from B: still B's own job.
			b2, created, err := m.Submit(ctx, req("tenant-b", `{"amount":999}`))
			if err != nil || created || b2.ID != b.ID {
				t.Fatalf("B's replay: %v", err)
			}
			// A key only A used: B gets the very answer of a key nobody used.
			if _, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "tenant-a", Key: "a-only", Kind: "charge", Provider: "p1", Params: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			_, errA := m.GetByKey(ctx, "tenant-b", "a-only")
			_, errNone := m.GetByKey(ctx, "tenant-b", "nobody-used-this")
			if !errors.Is(errA, jobs.ErrNotFound) || errA.Error() != errNone.Error() {
				t.Fatalf("B probing A's key: %v vs %v; must be the same not-found", errA, errNone)
			}
			// B's progress never touches A's job.
			att, err := m.StartAttempt(ctx, b.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Complete(ctx, att.ID, json.RawMessage(`"b"`)); err != nil {
				t.Fatal(err)
			}
			gotA, _ := m.GetByKey(ctx, "tenant-a", "shared-key")
			if gotA.ID != a.ID || gotA.State != jobs.JobPending || gotA.Result != nil || string(gotA.Params) != `{"amount":100}` {
				t.Fatalf("A's job changed by B: %+v", gotA)
			}
			assertInvariants(t, s)
		})
	}
}
