package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// jobsctl writes a SQLite database as the service does: with the
// library's durable settings (synchronous=FULL, so that an acknowledged
// cancel or purge survives a power cut) and through its write queue, so
// that it waits its turn behind the service's writers instead of writing
// around them.
func TestSQLiteWritesAreDurableAndWaitTheirTurn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobs.db")
	service := testdb.NewSQLiteAt(t, path)
	m := jobstest.NewManager(t, service, jobs.Options{})
	ctx := context.Background()
	j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "k", Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.StartAttempt(ctx, j.ID, "")
	if err != nil {
		t.Fatal(err)
	}

	c := &cli{sqlite: path, timeout: defaultWait, getenv: func(string) string { return "" }}
	s, closeStore, err := c.store(ctx, openChecked)
	if err != nil {
		t.Fatal(err)
	}
	var sync int
	if err := s.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("jobsctl's SQLite writer runs at synchronous=%d, %v; want 2 (FULL)", sync, err)
	}
	closeStore()

	// Another process of the service holds the write lock: jobsctl's
	// cancel waits for it, and gives up at its timeout having written
	// nothing.
	lock, err := os.OpenFile(path+"-lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the write queue's lock file: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := jobsctl(t, nil, "--sqlite", path, "--timeout", "1s", "cancel", a.ID, "--reason", "operator: never sent")
	if r.code == 0 || time.Since(start) < time.Second {
		t.Errorf("cancel while another writer holds the lock: exit %d after %v; want a failure after waiting 1s\n%s%s",
			r.code, time.Since(start), r.stdout, r.stderr)
	}
	if got, _ := service.Attempt(ctx, a.ID); got.State != jobs.AttemptStarting {
		t.Errorf("a cancel that did not get the lock wrote: attempt is %s", got.State)
	}
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	jobsctl(t, nil, "--sqlite", path, "cancel", a.ID, "--reason", "operator: never sent").want(t, 0, "is cancelled")
	if got, _ := service.Attempt(ctx, a.ID); got.State != jobs.AttemptCancelled {
		t.Errorf("after cancel the attempt is %s", got.State)
	}
}

// purge --force takes the retention away, never the guard: a cancelled
// job whose attempt may still act is kept, however old, so that its key
// is not freed for a second job of the same intent.
func TestForcedPurgeKeepsJobsWhoseAttemptMayAct(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := jobstest.NewManager(t, db.store, jobs.Options{})
			j, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "u", Key: "in-doubt", Kind: "charge", Provider: "stripe", Params: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.StartAttempt(ctx, j.ID, "")
			if err == nil {
				_, err = m.MarkUnknown(ctx, a.ID, "timed out")
			}
			if err == nil {
				_, err = m.CancelJob(ctx, j.ID, "the user gave up")
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // closed before the cutoff below
			jobsctl(t, nil, db.args("purge", "--older-than", "1ms", "--force")...).want(t, 0, "purged 0 jobs")
			if _, err := db.store.Job(ctx, j.ID); err != nil {
				t.Errorf("a forced purge removed a job whose attempt is unknown: %v", err)
			}
		})
	}
}
