package jobs

import (
	"context"
	"testing"
	"time"
)

// fixedStore answers UpdateAttempt without a database, so that allocation
// counts measure the Manager alone.
type fixedStore struct {
	Store
	a Attempt
}

func (s fixedStore) UpdateAttempt(ctx context.Context, u AttemptUpdate) (Attempt, error) {
	return s.a, nil
}

// TestEventsCostNothingWhenUnset checks that a Manager without an Observer
// allocates nothing for events, and that observing adds no allocation either.
func TestEventsCostNothingWhenUnset(t *testing.T) {
	ctx := context.Background()
	st := fixedStore{a: Attempt{ID: "att_1", JobID: "job_1", Provider: "p", State: AttemptFailed}}
	bare, err := New(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		bare.emit(ctx, Event{Type: EventAttemptFailed, JobID: "job_1", AttemptID: "att_1", Reason: "r", Duration: time.Second})
		bare.emitPurged(ctx, PurgeResult{}, time.Now())
	}); n != 0 {
		t.Errorf("emit without an observer: %v allocations, want 0", n)
	}
	var seen int
	observed, err := New(st, Options{Observer: ObserverFunc(func(context.Context, Event) { seen++ })})
	if err != nil {
		t.Fatal(err)
	}
	fail := func(m *Manager) func() {
		return func() {
			if _, err := m.Fail(ctx, "att_1", "declined"); err != nil {
				t.Fatal(err)
			}
		}
	}
	without := testing.AllocsPerRun(200, fail(bare))
	with := testing.AllocsPerRun(200, fail(observed))
	if with != without {
		t.Errorf("Fail allocates %v times with an observer and %v without; events should add none", with, without)
	}
	if seen == 0 {
		t.Error("the observer saw nothing")
	}
}
