package history

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/history/internal/capgen"
	"github.com/intentjobs/jobs/memstore"
)

// fullStore is a store with every capability: memstore's, and a
// CreateJobTx that ignores the transaction.
type fullStore struct{ *memstore.Store }

func (s fullStore) CreateJobTx(ctx context.Context, _ jobs.DBTX, j jobs.Job) (jobs.Job, bool, error) {
	return s.CreateJob(ctx, j)
}

// has reports the capabilities of s by asserting each interface, apart
// from capabilitiesOf.
func has(s jobs.Store) map[string]bool {
	_, tx := s.(jobs.TxStore)
	_, lister := s.(jobs.JobLister)
	_, claims := s.(jobs.ClaimStore)
	_, verifications := s.(jobs.VerificationStore)
	_, purge := s.(jobs.PurgeStore)
	_, notifier := s.(jobs.CloseNotifier)
	_, lookups := s.(jobs.LookupStore)
	_, counter := s.(jobs.JobCounter)
	_, attempts := s.(jobs.AttemptLister)
	_, pgx := s.(jobs.PgxTxStore)
	return map[string]bool{"TxStore": tx, "JobLister": lister, "ClaimStore": claims,
		"VerificationStore": verifications, "PurgeStore": purge, "CloseNotifier": notifier,
		"LookupStore": lookups, "JobCounter": counter, "AttemptLister": attempts, "PgxTxStore": pgx}
}

func want(set capability) map[string]bool {
	return map[string]bool{"TxStore": set&capTx != 0, "JobLister": set&capLister != 0, "ClaimStore": set&capClaims != 0,
		"VerificationStore": set&capVerifications != 0, "PurgeStore": set&capPurge != 0,
		"CloseNotifier": set&capNotifier != 0, "LookupStore": set&capLookups != 0, "JobCounter": set&capCounter != 0,
		"AttemptLister": set&capAttemptLister != 0, "PgxTxStore": false}
}

// TestRecordKeepsCapabilities wraps a store of each of the 512 sets of
// capabilities and checks that the recorded store has exactly that set,
// and that each capability it has reaches the inner store and is recorded.
func TestRecordKeepsCapabilities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sink, err := NewSink(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	calls := 0
	for set := capability(0); set <= allCapabilities; set++ {
		// An inner store with exactly set: a recorder of a full store,
		// seen through set.
		inner := combine(&recorder{inner: fullStore{memstore.New()}, sink: sink, client: "inner"}, set)
		if got, w := has(inner), want(set); !equalMaps(got, w) {
			t.Fatalf("set %09b: inner store has %v; want %v", set, got, w)
		}
		s := Record(inner, sink, "outer")
		if got, w := has(s), want(set); !equalMaps(got, w) {
			t.Errorf("set %09b: recorded store has %v; want %v", set, got, w)
		}
		// Each capability answers through the recorder.
		j, _, err := s.CreateJob(ctx, jobs.Job{ID: "job_1", Owner: "o", Key: "k", Kind: "k", Provider: "p", Params: []byte(`{}`), CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if c, ok := s.(jobs.TxStore); ok {
			if _, _, err := c.CreateJobTx(ctx, nil, j); err != nil {
				t.Errorf("set %09b: CreateJobTx: %v", set, err)
			}
			calls++
		}
		if c, ok := s.(jobs.JobLister); ok {
			if got, err := c.ListJobs(ctx, jobs.JobQuery{}); err != nil || len(got) != 1 {
				t.Errorf("set %09b: ListJobs = %v, %v", set, got, err)
			}
			calls++
		}
		if c, ok := s.(jobs.ClaimStore); ok {
			if _, err := c.StaleAttempts(ctx, jobs.StaleQuery{}); err != nil {
				t.Errorf("set %09b: StaleAttempts: %v", set, err)
			}
			calls++
		}
		if c, ok := s.(jobs.VerificationStore); ok {
			if _, err := c.Verifications(ctx, jobs.VerificationFilter{}); err != nil {
				t.Errorf("set %09b: Verifications: %v", set, err)
			}
			calls++
		}
		if c, ok := s.(jobs.PurgeStore); ok {
			if _, err := c.PurgeJobs(ctx, jobs.PurgeQuery{DryRun: true}); err != nil {
				t.Errorf("set %09b: PurgeJobs: %v", set, err)
			}
			calls++
		}
		if c, ok := s.(jobs.CloseNotifier); ok {
			_, stop, err := c.NotifyClosed(ctx, j.ID)
			if err != nil {
				t.Errorf("set %09b: NotifyClosed: %v", set, err)
			} else {
				stop()
			}
			calls++
		}
		if c, ok := s.(jobs.LookupStore); ok {
			if err := c.RecordLookup(ctx, jobs.AttemptLookup{AttemptID: "att_none", At: time.Now(), Answer: "pending"}); !errors.Is(err, jobs.ErrNotFound) {
				t.Errorf("set %09b: RecordLookup of no attempt: %v; want jobs.ErrNotFound", set, err)
			}
			if got, err := c.ReconcileStates(ctx, []string{"att_none"}); err != nil || len(got) != 0 {
				t.Errorf("set %09b: ReconcileStates = %v, %v", set, got, err)
			}
			calls += 2
		}
		if c, ok := s.(jobs.JobCounter); ok {
			if n, err := c.CountJobs(ctx, jobs.JobQuery{}); err != nil || n != 1 {
				t.Errorf("set %09b: CountJobs = %d, %v; want 1", set, n, err)
			}
			calls++
		}
		if c, ok := s.(jobs.AttemptLister); ok {
			if got, err := c.ListAttempts(ctx, jobs.AttemptQuery{}); err != nil || len(got) != 0 {
				t.Errorf("set %09b: ListAttempts = %v, %v", set, got, err)
			}
			calls++
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := Load(dirOf(sink))
	if err != nil {
		t.Fatal(err)
	}
	outer := 0
	for _, op := range h.Ops {
		if op.Client == "outer" {
			outer++
		}
	}
	// Every call was recorded twice: by the recorded store, and by the
	// recorder inside the inner store.
	if outer != calls || len(h.Ops) != 2*calls {
		t.Errorf("recorded %d calls of the outer store, %d in all; want %d and %d", outer, len(h.Ops), calls, 2*calls)
	}
}

func equalMaps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func dirOf(s *Sink) string {
	p := s.Path()
	for i := len(p) - 1; i >= 0; i-- {
		if os.IsPathSeparator(p[i]) {
			return p[:i]
		}
	}
	return "."
}

// TestRecordedManagerAsInner checks, through jobs.Manager, that what a
// Manager does with a missing capability is the same over the recorded
// store as over the inner one: SubmitTx and a Reconciler's pass answer
// errors.ErrUnsupported alike.
func TestRecordedManagerAsInner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sink, err := NewSink(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	bare := combine(&recorder{inner: fullStore{memstore.New()}, sink: sink, client: "inner"}, 0)
	for name, s := range map[string]jobs.Store{"inner": bare, "recorded": Record(bare, sink, "outer")} {
		m, err := jobs.New(s, jobs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = m.SubmitTx(ctx, nil, jobs.SubmitRequest{Owner: "o", Key: "k", Kind: "charge", Provider: "p", Params: []byte(`{}`)})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: SubmitTx without TxStore: %v; want errors.ErrUnsupported", name, err)
		}
		_, err = (&failover.Reconciler{Manager: m}).ReconcileOnce(ctx)
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: ReconcileOnce without ClaimStore: %v; want errors.ErrUnsupported", name, err)
		}
	}
}

// TestGeneratedUpToDate checks that capabilities.go is what the generator
// writes: run go generate in this directory when it fails.
func TestGeneratedUpToDate(t *testing.T) {
	t.Parallel()
	want, err := capgen.Source()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("capabilities.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("capabilities.go is not what the generator writes: run go generate ./history")
	}
}
