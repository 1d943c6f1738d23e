package faultstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func newJob(key string) jobs.Job {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return jobs.Job{ID: "job_" + key, Owner: "o", Key: key, Kind: "k", Provider: "p", Params: json.RawMessage(`{}`),
		Fingerprint: "f", State: jobs.JobPending, Version: 1, CreatedAt: now, UpdatedAt: now}
}

// fates records which calls of a run failed, and how.
func fates(t *testing.T, seed uint64) []string {
	t.Helper()
	fs := faultstore.New(testdb.NewSQLite(t), faultstore.Config{Seed: seed, Rate: 0.5, AfterShare: 0.5})
	var out []string
	for i := range 40 {
		_, _, err := fs.CreateJob(context.Background(), newJob(fmt.Sprint(i)))
		out = append(out, fmt.Sprint(err))
	}
	return out
}

func TestSeedReproduces(t *testing.T) {
	t.Parallel()
	a, b, c := fates(t, 7), fates(t, 7), fates(t, 8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different faults")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave the same 40 fates")
	}
}

func TestBeforeAndAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name        string
		after       float64
		wantWritten bool
		kind        faultstore.Kind
	}{
		{"before: nothing written", 0, false, faultstore.Before},
		{"after: written, then a timeout", 1, true, faultstore.After},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inner := testdb.NewSQLite(t)
			fs := faultstore.New(inner, faultstore.Config{Seed: 1, Rates: map[faultstore.Method]float64{faultstore.CreateJob: 1}, AfterShare: tt.after})
			_, _, err := fs.CreateJob(ctx, newJob("a"))
			var se *jobs.StorageError
			if !errors.As(err, &se) || se.Kind != jobs.StorageUnavailable {
				t.Fatalf("got %v, want an unavailable StorageError", err)
			}
			_, err = inner.JobByKey(ctx, "o", "a")
			if written := err == nil; written != tt.wantWritten {
				t.Fatalf("written = %v, want %v", written, tt.wantWritten)
			}
			// Other methods keep the default rate (0): reads pass.
			if _, err := fs.JobByKey(ctx, "o", "zzz"); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("read: %v", err)
			}
			st := fs.Stats()
			if st.Total() != 1 || st.TotalKind(tt.kind) != 1 || st.Calls[faultstore.CreateJob] != 1 || st.Calls[faultstore.JobByKey] != 1 {
				t.Fatalf("stats %+v", st)
			}
			fs.SetEnabled(false)
			if _, _, err := fs.CreateJob(ctx, newJob("b")); err != nil {
				t.Fatalf("disabled: %v", err)
			}
		})
	}
}

// TestReadsNeverApplyThenFail: After faults are for writes only.
func TestReadsNeverApplyThenFail(t *testing.T) {
	t.Parallel()
	fs := faultstore.New(testdb.NewSQLite(t), faultstore.Config{Seed: 3, Rate: 1, AfterShare: 1})
	for range 10 {
		fs.Job(context.Background(), "job_x")
	}
	if st := fs.Stats(); st.TotalKind(faultstore.After) != 0 || st.TotalKind(faultstore.Before) != 10 {
		t.Fatalf("stats %+v", st)
	}
}
