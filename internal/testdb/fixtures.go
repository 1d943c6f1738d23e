package testdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/intentjobs/jobs"
)

// StoreCase opens stores of one dialect: Open returns a store on a fresh
// database, and another returns a second, independent handle on that same
// database, as a second process would have.
type StoreCase struct {
	Name string
	Open func(t *testing.T) (s Store, another func() Store)
}

// StoreCases are SQLite (a file in the test's directory) and PostgreSQL (a
// schema of the test's own).
func StoreCases() []StoreCase {
	return []StoreCase{
		{"sqlite", func(t *testing.T) (Store, func() Store) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			return NewSQLiteAt(t, path), func() Store { return NewSQLiteAt(t, path) }
		}},
		{"postgres", func(t *testing.T) (Store, func() Store) {
			dsn := PostgresDSN(t)
			open := func() Store {
				s, err := jobs.OpenPostgres(context.Background(), dsn)
				if err != nil {
					t.Fatalf("open postgres: %v", err)
				}
				s.DB().SetMaxOpenConns(4)
				t.Cleanup(func() { s.Close() })
				return s
			}
			return open(), open
		}},
	}
}

// ForEachStore runs fn as a parallel subtest per dialect.
func ForEachStore(t *testing.T, fn func(t *testing.T, sc StoreCase)) {
	t.Helper()
	for _, sc := range StoreCases() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, sc)
		})
	}
}

// KindSummarize is the kind of the tests' jobs with a contract,
// SummaryContract.
const KindSummarize = "summarize"

// SummaryContract accepts {"summary": "<non-empty text>"} and nothing else.
func SummaryContract(version string) jobs.Contract {
	return jobs.Contract{Version: version, Validate: func(raw json.RawMessage) error {
		var v struct {
			Summary *string `json:"summary"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not a summary object: %v", err)
		}
		if v.Summary == nil || *v.Summary == "" {
			return errors.New("summary is missing or empty")
		}
		return nil
	}}
}

// Events collects a Manager's events; it is a jobs.Observer.
type Events struct {
	mu  sync.Mutex
	All []jobs.Event
}

// Observe implements jobs.Observer.
func (e *Events) Observe(_ context.Context, ev jobs.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.All = append(e.All, ev)
}

// Count returns how many events of type typ were observed.
func (e *Events) Count(typ jobs.EventType) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.All {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// Snapshot returns the events observed so far.
func (e *Events) Snapshot() []jobs.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]jobs.Event(nil), e.All...)
}
