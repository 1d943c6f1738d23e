package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// TestSQLiteReturnsAttemptsAsStored: CreateAttempt and UpdateAttempt build
// the attempt they return from what they wrote instead of reading it back;
// it must be the attempt as stored, for every move, on a store whose
// writer waits briefly for SQLite's lock (OpenSQLite), one whose DSN sets
// a busy timeout of its own, and one over the caller's handle.
func TestSQLiteReturnsAttemptsAsStored(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		open func(t *testing.T) jobs.Store
	}{
		{"OpenSQLite", func(t *testing.T) jobs.Store { return testdb.NewSQLite(t) }},
		{"OpenSQLite with a busy timeout of its own", func(t *testing.T) jobs.Store {
			return testdb.NewSQLiteAt(t, filepath.Join(t.TempDir(), "jobs.db")+"?_busy_timeout=1000")
		}},
		{"NewSQLiteStore", func(t *testing.T) jobs.Store {
			s, err := jobs.NewSQLiteStore(context.Background(), testdb.NewSQLite(t).DB())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	type move struct {
		from        []jobs.AttemptState
		to          jobs.AttemptState
		ref, reason string
	}
	start := []jobs.AttemptState{jobs.AttemptStarting}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := st.open(t)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// Times with nanoseconds: the store keeps microseconds.
			at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.Local)
			for i, tc := range []struct {
				name     string
				provider string
				moves    []move
			}{
				{"running with a reference, unknown, failed", "", []move{
					{start, jobs.AttemptRunning, "ref-1", ""},
					{[]jobs.AttemptState{jobs.AttemptRunning}, jobs.AttemptUnknown, "", "timed out"},
					{[]jobs.AttemptState{jobs.AttemptUnknown}, jobs.AttemptFailed, "", ""},
				}},
				{"unknown, a late reference, cancelled with a reason", "other", []move{
					{start, jobs.AttemptUnknown, "", "no answer"},
					{[]jobs.AttemptState{jobs.AttemptUnknown}, jobs.AttemptUnknown, "ref-late", ""},
					{[]jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown}, jobs.AttemptCancelled, "", "stopped"},
				}},
				{"failed at once", "", []move{{start, jobs.AttemptFailed, "", "refused"}}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: tc.name, Kind: "translate", Provider: "alpha",
						Params: json.RawMessage(`{}`)})
					if err != nil {
						t.Fatal(err)
					}
					at = at.Add(time.Second)
					got, err := s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_returned_" + string(rune('a'+i)), JobID: j.ID,
						Provider: tc.provider, At: at})
					if err != nil {
						t.Fatal(err)
					}
					sameAsStored(t, s, "CreateAttempt", got)
					for _, mv := range tc.moves {
						at = at.Add(time.Second)
						got, err = s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: got.ID, From: mv.from, To: mv.to,
							ProviderRef: mv.ref, Reason: mv.reason, At: at})
						if err != nil {
							t.Fatalf("UpdateAttempt to %s: %v", mv.to, err)
						}
						sameAsStored(t, s, "UpdateAttempt to "+string(mv.to), got)
					}
				})
			}
			t.Run("cancelled ctx", func(t *testing.T) {
				j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "cancelled", Kind: "translate", Provider: "alpha",
					Params: json.RawMessage(`{}`)})
				if err != nil {
					t.Fatal(err)
				}
				a, err := s.CreateAttempt(ctx, jobs.NewAttempt{ID: "att_returned_cancelled", JobID: j.ID, At: at})
				if err != nil {
					t.Fatal(err)
				}
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				_, err = s.UpdateAttempt(cctx, jobs.AttemptUpdate{ID: a.ID, From: start, To: jobs.AttemptRunning,
					ProviderRef: "ref", At: at.Add(time.Second)})
				if !errors.Is(err, context.Canceled) || !errors.Is(err, jobs.ErrStorage) {
					t.Errorf("UpdateAttempt with a cancelled ctx = %v, want a storage error matching context.Canceled", err)
				}
				sameAsStored(t, s, "a refused UpdateAttempt", a)
			})
		})
	}
}

// sameAsStored fails t unless a is the attempt as the store reads it.
func sameAsStored(t *testing.T, s jobs.Store, what string, a jobs.Attempt) {
	t.Helper()
	stored, err := s.Attempt(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, a); diff != "" {
		t.Errorf("%s returned the attempt unlike it is stored (-stored +returned):\n%s", what, diff)
	}
}
