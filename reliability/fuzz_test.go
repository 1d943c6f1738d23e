package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// The fuzz targets below run their seed corpus (testdata/fuzz/…) with every
// go test; fuzz them with, e.g.:
//
//	go test ./reliability -run '^$' -fuzz FuzzCanonicalize -fuzztime 10m

// FuzzCanonicalize checks Canonicalize on any input: what it accepts is
// valid JSON with the same meaning, canonical already, and insensitive to
// whitespace; what encoding/json rejects it rejects too.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[true,null,"x"]}`, `"\u00e9\ud83d\ude00"`, `1e400`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, err := jobs.Canonicalize(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form %q of %q is not valid JSON", canon, data)
		}
		again, err := jobs.Canonicalize(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", data, canon, again, err)
		}
		if !sameMeaning(data, canon) {
			t.Fatalf("meaning changed: %q -> %q", data, canon)
		}
		var indented bytes.Buffer
		if json.Indent(&indented, data, "", "\t ") == nil {
			other, err := jobs.Canonicalize(indented.Bytes())
			if err != nil || !bytes.Equal(other, canon) {
				t.Fatalf("whitespace changed the canonical form: %q vs %q (%v)", other, canon, err)
			}
			if jobs.Fingerprint("k", "p", other) != jobs.Fingerprint("k", "p", canon) {
				t.Fatal("whitespace changed the fingerprint")
			}
		}
	})
}

func sameMeaning(a, b []byte) bool {
	decode := func(d []byte) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

// FuzzFingerprint checks that moving bytes between kind, provider and
// params always changes the fingerprint: the fields are length-prefixed.
func FuzzFingerprint(f *testing.F) {
	f.Add("charge", "stripe", []byte(`{}`))
	f.Add("ab", "c", []byte(`1`))
	f.Fuzz(func(t *testing.T, kind, provider string, params []byte) {
		fp := jobs.Fingerprint(kind, provider, params)
		if len(fp) != 64 {
			t.Fatalf("fingerprint %q is not hex SHA-256", fp)
		}
		if fp != jobs.Fingerprint(kind, provider, params) {
			t.Fatal("not deterministic")
		}
		if len(provider) > 0 {
			if fp == jobs.Fingerprint(kind+provider[:1], provider[1:], params) {
				t.Fatalf("kind/provider boundary ignored: %q %q", kind, provider)
			}
		}
		if len(params) > 0 {
			if fp == jobs.Fingerprint(kind, provider+string(params[:1]), params[1:]) {
				t.Fatalf("provider/params boundary ignored: %q %q", provider, params)
			}
		}
	})
}

// FuzzSubmit sends any input through Submit on SQLite (and PostgreSQL when
// configured): each call is either refused with ErrInvalidInput, having
// written nothing, or stores a job that reads back byte for byte under
// exactly its owner and key, and replays to the same job. No input may
// reach the database as anything but a value (no ErrStorage).
func FuzzSubmit(f *testing.F) {
	f.Add("alice", "k1", "charge", "p1", []byte(`{"amount":1}`))
	f.Add("alice", "'; DROP TABLE jobs; --", "charge", "p1", []byte(`{}`))
	f.Add("alice", "%", "charge", "p1", []byte(`null`))
	stores := []testdb.Store{testdb.NewSQLite(f)}
	if pg := postgresIfConfigured(f); pg != nil {
		stores = append(stores, pg)
	}
	f.Fuzz(func(t *testing.T, owner, key, kind, provider string, params []byte) {
		for _, s := range stores {
			checkSubmit(t, s, jobs.SubmitRequest{Owner: owner, Key: key, Kind: kind, Provider: provider, Params: params})
		}
	})
}

func checkSubmit(t *testing.T, s testdb.Store, req jobs.SubmitRequest) {
	t.Helper()
	ctx := context.Background()
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := countJobs(t, s)
	j, created, err := m.Submit(ctx, req)
	switch {
	case errors.Is(err, jobs.ErrInvalidInput):
		if n := countJobs(t, s); n != before {
			t.Fatalf("refused input wrote %d jobs", n-before)
		}
		return
	case errors.Is(err, jobs.ErrKeyConflict):
		return // the same owner and key came earlier with another intent
	case err != nil:
		t.Fatalf("submit %+q: %v", req, err)
	}
	got, err := m.GetByKey(ctx, req.Owner, req.Key)
	if err != nil || got.ID != j.ID || got.Owner != req.Owner || got.Key != req.Key || got.Kind != req.Kind || got.Provider != req.Provider {
		t.Fatalf("read back %+q: %+v (%v)", req, got, err)
	}
	if canon, _ := jobs.Canonicalize(req.Params); !bytes.Equal(got.Params, canon) {
		t.Fatalf("params stored as %q, want %q", got.Params, canon)
	}
	again, createdAgain, err := m.Submit(ctx, req)
	if err != nil || createdAgain || again.ID != j.ID {
		t.Fatalf("replay: %v created=%v id %s, want %s (first created=%v)", err, createdAgain, again.ID, j.ID, created)
	}
}

func countJobs(t *testing.T, s testdb.Store) int {
	t.Helper()
	n, after := 0, ""
	for {
		page, err := s.ListJobs(context.Background(), jobs.JobQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return n
		}
		n += len(page)
		after = page[len(page)-1].ID
	}
}

// postgresIfConfigured returns a PostgreSQL store when the test database is
// configured, and nil (no skip) otherwise.
func postgresIfConfigured(tb testing.TB) testdb.Store {
	if !postgresConfigured() {
		return nil
	}
	return testdb.NewPostgres(tb)
}
