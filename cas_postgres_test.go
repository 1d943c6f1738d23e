package jobs_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
)

// TestPostgresCompleteAfterAWriteInFlight holds another writer's
// transaction open on the rows Complete needs, with the change a Cancel, a
// CancelJob or another attempt's Complete makes, and commits it only once
// Complete waits for it. Complete must decide on the committed rows, not
// on the snapshot it started with: a cancelled attempt never completes the
// job, and a loser is told the truth about the job. Each case fails if the
// statements read the attempt or the job without locking it. It runs on
// each of the store's paths: two statements sent together on pgx's
// connection, one statement on pgx's connection in exec mode, and one
// through database/sql.
func TestPostgresCompleteAfterAWriteInFlight(t *testing.T) {
	t.Parallel()
	testdb.PostgresDSN(t)
	now := `updated_at = now(), `
	cases := []struct {
		name string
		// write is the other writer's change to the job ({job}) and the
		// attempts {a} (the one Complete is called for) and {b} (a hedge).
		write []string
		check func(t *testing.T, err error, j jobs.Job, a, b jobs.Attempt)
	}{
		{
			name:  "Cancel of the attempt",
			write: []string{`UPDATE intentjobs_attempts SET state = 'cancelled', reason = 'stopped', ` + now + `finished_at = now() WHERE id = '{a}'`},
			check: func(t *testing.T, err error, j jobs.Job, a, _ jobs.Attempt) {
				if !errors.Is(err, jobs.ErrInvalidTransition) {
					t.Errorf("Complete = %v, want ErrInvalidTransition", err)
				}
				if j.State != jobs.JobRunning || j.CompletedBy != "" || j.Result != nil {
					t.Errorf("job = %s completed by %q result %s; want running, untouched", j.State, j.CompletedBy, j.Result)
				}
				if a.State != jobs.AttemptCancelled || a.Reason != "stopped" {
					t.Errorf("attempt = %s (%q), want cancelled (stopped)", a.State, a.Reason)
				}
			},
		},
		{
			name:  "CancelJob",
			write: []string{`UPDATE intentjobs_jobs SET state = 'cancelled', version = version + 1, reason = 'user', ` + now + `closed_at = now() WHERE id = '{job}'`},
			check: func(t *testing.T, err error, j jobs.Job, a, _ jobs.Attempt) {
				var closed *jobs.JobClosedError
				if !errors.As(err, &closed) || closed.State != jobs.JobCancelled {
					t.Errorf("Complete = %v, want JobClosedError (cancelled)", err)
				}
				if j.State != jobs.JobCancelled || j.CompletedBy != "" || j.Result != nil {
					t.Errorf("job = %s completed by %q result %s; want cancelled without a result", j.State, j.CompletedBy, j.Result)
				}
				if a.State != jobs.AttemptCancelled || a.Reason != "result dropped: job cancelled" {
					t.Errorf("attempt = %s (%q), want cancelled with the job", a.State, a.Reason)
				}
			},
		},
		{
			name: "Complete of another attempt",
			write: []string{
				`UPDATE intentjobs_jobs SET state = 'succeeded', result = '{"by":"b"}', completed_by = '{b}', version = version + 1, ` + now + `closed_at = now() WHERE id = '{job}'`,
				`UPDATE intentjobs_attempts SET state = 'succeeded', ` + now + `finished_at = now() WHERE id = '{b}'`,
			},
			check: func(t *testing.T, err error, j jobs.Job, a, b jobs.Attempt) {
				var lost *jobs.LostRaceError
				if !errors.As(err, &lost) || lost.WinnerID != b.ID {
					t.Errorf("Complete = %v, want LostRaceError naming %s", err, b.ID)
				}
				if j.State != jobs.JobSucceeded || j.CompletedBy != b.ID || string(j.Result) != `{"by":"b"}` {
					t.Errorf("job = %s completed by %q result %s; want b's", j.State, j.CompletedBy, j.Result)
				}
				if want := "result dropped: attempt " + b.ID + " completed the job first"; a.State != jobs.AttemptLost || a.Reason != want {
					t.Errorf("attempt = %s (%q), want lost (%q)", a.State, a.Reason, want)
				}
			},
		},
	}
	stores := []struct {
		name string
		open func(testing.TB) *jobs.PostgresStore
	}{
		{"pgx", func(t testing.TB) *jobs.PostgresStore { return testdb.NewPostgres(t) }},
		{"pgx exec mode", newUnnamedPostgres},
		{"database/sql", newWrappedPostgres},
	}
	for _, st := range stores {
		for _, c := range cases {
			t.Run(st.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), conflictDeadline)
				defer cancel()
				s := st.open(t)
				m, err := jobs.New(s, jobs.Options{Logger: discard})
				if err != nil {
					t.Fatal(err)
				}
				j, _, err := m.Submit(ctx, txRequest("k"))
				if err != nil {
					t.Fatal(err)
				}
				var as [2]jobs.Attempt
				for i := range as {
					a, err := m.StartAttempt(ctx, j.ID, "", jobs.Hedge())
					if err == nil {
						a, err = m.MarkRunning(ctx, a.ID, "ref-"+a.ID)
					}
					if err != nil {
						t.Fatal(err)
					}
					as[i] = a
				}
				a, b := as[0], as[1]

				other, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer other.Rollback()
				var pid int
				if err := other.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					t.Fatal(err)
				}
				ids := strings.NewReplacer("{job}", j.ID, "{a}", a.ID, "{b}", b.ID)
				for _, q := range c.write {
					if _, err := other.ExecContext(ctx, ids.Replace(q)); err != nil {
						t.Fatal(err)
					}
				}
				done := make(chan error, 1)
				go func() {
					_, err := m.Complete(ctx, a.ID, json.RawMessage(`{"by":"a"}`))
					done <- err
				}()
				waitBlockedBy(t, s.DB(), pid, done)
				if err := other.Commit(); err != nil {
					t.Fatal(err)
				}
				err = <-done
				j, err2 := m.Get(ctx, j.ID)
				if err2 != nil {
					t.Fatal(err2)
				}
				a, errA := m.Attempt(ctx, a.ID)
				b, errB := m.Attempt(ctx, b.ID)
				if errA != nil || errB != nil {
					t.Fatal(errA, errB)
				}
				c.check(t, err, j, a, b)
			})
		}
	}
}

// waitBlockedBy returns once some backend waits for a lock held by the
// backend pid. It fails the test if done delivers first: the call that
// was to wait finished without waiting.
func waitBlockedBy(t *testing.T, db *sql.DB, pid int, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(conflictDeadline)
	for {
		var blocked bool
		err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`, pid).Scan(&blocked)
		if err != nil {
			t.Fatal(err)
		}
		if blocked {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the call returned %v without waiting for backend %d's locks", err, pid)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing waited for backend %d", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
