package mysql_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// Manager.Wait returns once the job closes: at once when it closes
// through the same store, and at the next poll when another process (a
// store of its own on the same database) closes it.
func TestWaitIsWoken(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t, serverDSN(t))
	// A poll far longer than the test may take shows which wake-up came.
	here := openStoreAt(t, dsn, mysql.PollInterval(time.Hour))
	polling := openStoreAt(t, dsn, mysql.PollInterval(20*time.Millisecond))
	there := openStoreAt(t, dsn)
	mHere, _ := newManager(t, here)
	mPolling, _ := newManager(t, polling)
	mThere, _ := newManager(t, there)
	ctx := t.Context()

	for _, tc := range []struct {
		name   string
		waiter *jobs.Manager
		closer *jobs.Manager
	}{
		{"closed through the same store", mHere, mHere},
		{"closed through another", mPolling, mThere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _, err := tc.closer.Submit(ctx, charge("o", tc.name))
			if err != nil {
				t.Fatal(err)
			}
			a, err := tc.closer.StartAttempt(ctx, j.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan jobs.Job, 1)
			errs := make(chan error, 1)
			go func() {
				got, err := tc.waiter.Wait(ctx, j.ID)
				waited <- got
				errs <- err
			}()
			// Wait reads the job first, and registers once it is open;
			// the Complete may come before or after, and is seen either way.
			if _, err := tc.closer.Complete(ctx, a.ID, json.RawMessage(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
			got := <-waited
			if err := <-errs; err != nil || got.State != jobs.JobSucceeded || got.CompletedBy != a.ID {
				t.Fatalf("Wait = %s by %s, %v; want succeeded by %s", got.State, got.CompletedBy, err, a.ID)
			}
		})
	}

	// NotifyClosed itself, which the Manager's own reads cannot stand in
	// for: registered before the close, woken by it, through the store
	// that closed it (its poll is an hour away) or through another.
	for _, tc := range []struct {
		name   string
		waiter *mysql.Store
		closer *jobs.Manager
	}{
		{"same store", here, mHere},
		{"another store", polling, mThere},
	} {
		j, _, err := tc.closer.Submit(ctx, charge("o", "direct "+tc.name))
		if err != nil {
			t.Fatal(err)
		}
		wake, stop, err := tc.waiter.NotifyClosed(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.closer.CancelJob(ctx, j.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("%s: no wake-up for job %s", tc.name, j.ID)
		}
		stop()
	}
}
