package jobs_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/intentjobs/jobs"
)

// unusedStore is a jobs.Store for tests that never reach the store.
type unusedStore struct{ jobs.Store }

// TestNewRefusesBadOptions checks that New reports options it cannot work
// with as an *InputError naming the field, and returns no Manager, instead
// of failing later or panicking.
func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	valid := func(json.RawMessage) error { return nil }
	contract := func(kind string, c jobs.Contract) map[string]jobs.Contract { return map[string]jobs.Contract{kind: c} }
	for _, tc := range []struct {
		name  string
		store jobs.Store
		opts  jobs.Options
		field string
	}{
		{"nil store", nil, jobs.Options{}, "store"},
		{"negative params limit", unusedStore{}, jobs.Options{MaxParamsBytes: -1}, "MaxParamsBytes"},
		{"negative result limit", unusedStore{}, jobs.Options{MaxResultBytes: -1}, "MaxResultBytes"},
		{"negative retention", unusedStore{}, jobs.Options{Retention: -1}, "Retention"},
		{"negative write timeout", unusedStore{}, jobs.Options{WriteTimeout: -1}, "WriteTimeout"},
		{"contract without version", unusedStore{}, jobs.Options{Contracts: contract("k", jobs.Contract{Validate: valid})}, `Contracts["k"].Version`},
		{"contract without Validate", unusedStore{}, jobs.Options{Contracts: contract("k", jobs.Contract{Version: "v1"})}, `Contracts["k"].Validate`},
		{"contract version not UTF-8", unusedStore{}, jobs.Options{Contracts: contract("k", jobs.Contract{Version: "\xff", Validate: valid})}, `Contracts["k"].Version`},
		{"contract for an empty kind", unusedStore{}, jobs.Options{Contracts: contract("", jobs.Contract{Version: "v1", Validate: valid})}, `Contracts[""]`},
		{"contract for a kind not UTF-8", unusedStore{}, jobs.Options{Contracts: contract("\xff", jobs.Contract{Version: "v1", Validate: valid})}, `Contracts["\xff"]`},
		{"contract for a kind with NUL", unusedStore{}, jobs.Options{Contracts: contract("a\x00", jobs.Contract{Version: "v1", Validate: valid})}, `Contracts["a\x00"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := jobs.New(tc.store, tc.opts)
			var in *jobs.InputError
			if !errors.As(err, &in) || in.Field != tc.field || m != nil {
				t.Fatalf("New: %v, %v; want no Manager and an *InputError for %s", m, err, tc.field)
			}
		})
	}
	if _, err := jobs.New(unusedStore{}, jobs.Options{Contracts: contract("k", jobs.Contract{Version: "v1", Validate: valid})}); err != nil {
		t.Fatalf("New with good options: %v", err)
	}
}
