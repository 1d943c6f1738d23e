package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/faultstore"
	"github.com/intentjobs/jobs/jobstest"
)

var params = json.RawMessage(`{"amount": 5}`)

func submitReq(key string) jobs.SubmitRequest {
	return jobs.SubmitRequest{Owner: "alice", Key: key, Kind: "charge", Provider: "p1", Params: params}
}

// TestRepeatIsSafe repeats every verb after it took effect, as a caller does
// when it did not hear the answer: each repeat reports the same outcome and
// writes nothing.
func TestRepeatIsSafe(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := d.open(t)
			m, err := jobs.New(s, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}

			j1, created, err := m.Submit(ctx, submitReq("k"))
			if err != nil || !created {
				t.Fatalf("submit: %v created=%v", err, created)
			}
			j2, created, err := m.Submit(ctx, submitReq("k"))
			if err != nil || created || j2.ID != j1.ID {
				t.Fatalf("repeated submit: job %s created=%v err=%v, want %s", j2.ID, created, err, j1.ID)
			}

			a, err := m.StartAttempt(ctx, j1.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if got, err := m.MarkRunning(ctx, a.ID, "ref-1"); err != nil || got.ProviderRef != "ref-1" {
					t.Fatalf("mark running: %v %+v", err, got)
				}
			}
			if _, err := m.MarkRunning(ctx, a.ID, "ref-2"); !errors.Is(err, jobs.ErrInvalidTransition) {
				t.Fatalf("mark running with another reference: %v, want ErrInvalidTransition", err)
			}
			for range 2 {
				if got, err := m.MarkUnknown(ctx, a.ID, "timeout"); err != nil || got.State != jobs.AttemptUnknown {
					t.Fatalf("mark unknown: %v %+v", err, got)
				}
			}
			res := json.RawMessage(`{"charged":5}`)
			done, err := m.Complete(ctx, a.ID, res)
			if err != nil {
				t.Fatal(err)
			}
			again, err := m.Complete(ctx, a.ID, res)
			if err != nil || again.Version != done.Version || again.CompletedBy != a.ID {
				t.Fatalf("repeated complete by the winner: %v, version %d -> %d", err, done.Version, again.Version)
			}

			// Fail, Cancel, CancelJob and FailJob, each twice.
			for _, tt := range []struct {
				name string
				do   func(jobID, attemptID string) error
			}{
				{"fail", func(_, id string) error { _, err := m.Fail(ctx, id, "no"); return err }},
				{"cancel", func(_, id string) error { _, err := m.Cancel(ctx, id, "never sent"); return err }},
			} {
				j, _, err := m.Submit(ctx, submitReq("k-"+tt.name))
				if err != nil {
					t.Fatal(err)
				}
				a, err := m.StartAttempt(ctx, j.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					if err := tt.do(j.ID, a.ID); err != nil {
						t.Fatalf("%s #%d: %v", tt.name, i+1, err)
					}
				}
			}
			for _, tt := range []struct {
				name string
				do   func(jobID string) (jobs.Job, error)
			}{
				{"cancel job", func(id string) (jobs.Job, error) { return m.CancelJob(ctx, id, "stop") }},
				{"fail job", func(id string) (jobs.Job, error) { return m.FailJob(ctx, id, "gave up") }},
			} {
				j, _, err := m.Submit(ctx, submitReq("k-"+tt.name))
				if err != nil {
					t.Fatal(err)
				}
				first, err := tt.do(j.ID)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				second, err := tt.do(j.ID)
				if err != nil || second.Version != first.Version || second.State != first.State {
					t.Fatalf("repeated %s: %v, %s v%d -> %s v%d", tt.name, err, first.State, first.Version, second.State, second.Version)
				}
			}
			assertInvariants(t, s)
		})
	}
}

// TestAmbiguousCommit makes each write commit and then report a timeout,
// and checks that the caller's retry gets the outcome the first call had.
func TestAmbiguousCommit(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := d.open(t)
			plain, err := jobs.New(store, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// ambiguous returns a manager whose first call of method commits
			// and then fails, and a function that turns faults off.
			ambiguous := func(method faultstore.Method) (*jobs.Manager, func()) {
				fs := faultstore.New(store, faultstore.Config{Seed: 1, Rates: map[faultstore.Method]float64{method: 1}, AfterShare: 1})
				return jobstest.NewManager(t, fs, jobs.Options{}), func() { fs.SetEnabled(false) }
			}
			newJob := func(key string) (jobs.Job, jobs.Attempt) {
				t.Helper()
				j, _, err := plain.Submit(ctx, submitReq(key))
				if err != nil {
					t.Fatal(err)
				}
				a, err := plain.StartAttempt(ctx, j.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				return j, a
			}
			storageErr := func(err error) {
				t.Helper()
				if !errors.Is(err, jobs.ErrStorage) {
					t.Fatalf("first call: %v, want ErrStorage", err)
				}
			}

			t.Run("submit", func(t *testing.T) {
				m, off := ambiguous(faultstore.CreateJob)
				_, _, err := m.Submit(ctx, submitReq("amb-submit"))
				storageErr(err)
				off()
				j, created, err := m.Submit(ctx, submitReq("amb-submit"))
				if err != nil || created {
					t.Fatalf("retry: created=%v err=%v, want the job the first call made", created, err)
				}
				if got, _ := plain.GetByKey(ctx, "alice", "amb-submit"); got.ID != j.ID {
					t.Fatalf("retry returned %s, store has %s", j.ID, got.ID)
				}
			})
			t.Run("start attempt", func(t *testing.T) {
				j, _, err := plain.Submit(ctx, submitReq("amb-start"))
				if err != nil {
					t.Fatal(err)
				}
				m, off := ambiguous(faultstore.CreateAttempt)
				_, err = m.StartAttempt(ctx, j.ID, "")
				storageErr(err)
				off()
				// The orphan is in doubt: a retry is refused and names it,
				// so the caller can settle it (it never reached the provider).
				_, err = m.StartAttempt(ctx, j.ID, "")
				var inFlight *jobs.AttemptInFlightError
				if !errors.As(err, &inFlight) || inFlight.State != jobs.AttemptStarting {
					t.Fatalf("retry: %v, want ErrAttemptInFlight naming the starting orphan", err)
				}
				if _, err := m.Cancel(ctx, inFlight.AttemptID, "never sent"); err != nil {
					t.Fatal(err)
				}
				if _, err := m.StartAttempt(ctx, j.ID, ""); err != nil {
					t.Fatalf("after settling the orphan: %v", err)
				}
			})
			t.Run("complete", func(t *testing.T) {
				_, a := newJob("amb-complete")
				m, off := ambiguous(faultstore.CompleteAttempt)
				_, err := m.Complete(ctx, a.ID, json.RawMessage(`1`))
				storageErr(err)
				off()
				j, err := m.Complete(ctx, a.ID, json.RawMessage(`1`))
				if err != nil || j.CompletedBy != a.ID || j.Version != 2 {
					t.Fatalf("retry: %v, job %+v; want success, completed by %s at version 2", err, j, a.ID)
				}
			})
			t.Run("complete on a closed job", func(t *testing.T) {
				j, a := newJob("amb-complete-closed")
				if _, err := plain.CancelJob(ctx, j.ID, "user gave up"); err != nil {
					t.Fatal(err)
				}
				m, off := ambiguous(faultstore.CompleteAttempt)
				_, err := m.Complete(ctx, a.ID, json.RawMessage(`1`))
				storageErr(err)
				off()
				// The first call dropped the result and cancelled the attempt;
				// the retry must say the same, not that the attempt moved.
				_, err = m.Complete(ctx, a.ID, json.RawMessage(`1`))
				var closed *jobs.JobClosedError
				if !errors.As(err, &closed) || closed.State != jobs.JobCancelled {
					t.Fatalf("retry: %v, want ErrJobClosed (cancelled)", err)
				}
			})
			for _, tt := range []struct {
				name string
				do   func(m *jobs.Manager, a jobs.Attempt) (jobs.AttemptState, error)
			}{
				{"mark running", func(m *jobs.Manager, a jobs.Attempt) (jobs.AttemptState, error) {
					got, err := m.MarkRunning(ctx, a.ID, "ref")
					return got.State, err
				}},
				{"mark unknown", func(m *jobs.Manager, a jobs.Attempt) (jobs.AttemptState, error) {
					got, err := m.MarkUnknown(ctx, a.ID, "timeout")
					return got.State, err
				}},
				{"fail", func(m *jobs.Manager, a jobs.Attempt) (jobs.AttemptState, error) {
					got, err := m.Fail(ctx, a.ID, "no")
					return got.State, err
				}},
				{"cancel", func(m *jobs.Manager, a jobs.Attempt) (jobs.AttemptState, error) {
					got, err := m.Cancel(ctx, a.ID, "stop")
					return got.State, err
				}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					_, a := newJob("amb-" + tt.name)
					m, off := ambiguous(faultstore.UpdateAttempt)
					_, err := tt.do(m, a)
					storageErr(err)
					off()
					if state, err := tt.do(m, a); err != nil {
						t.Fatalf("retry: %v (state %s)", err, state)
					}
				})
			}
			for _, tt := range []struct {
				name string
				to   jobs.JobState
			}{{"cancel job", jobs.JobCancelled}, {"fail job", jobs.JobFailed}} {
				t.Run(tt.name, func(t *testing.T) {
					j, _, err := plain.Submit(ctx, submitReq("amb-"+tt.name))
					if err != nil {
						t.Fatal(err)
					}
					m, off := ambiguous(faultstore.CloseJob)
					do := m.CancelJob
					if tt.to == jobs.JobFailed {
						do = m.FailJob
					}
					_, err = do(ctx, j.ID, "done")
					storageErr(err)
					off()
					got, err := do(ctx, j.ID, "done")
					if err != nil || got.State != tt.to || got.Version != 2 {
						t.Fatalf("retry: %v, %s v%d", err, got.State, got.Version)
					}
				})
			}
			assertInvariants(t, store)
		})
	}
}

// cancelling wraps a store and cancels the caller's context just before
// each outcome write reaches the database, as an impatient caller or a
// closing HTTP request would.
type cancelling struct {
	jobs.Store
	cancel context.CancelFunc
}

func (c cancelling) CompleteAttempt(ctx context.Context, x jobs.Completion) (jobs.Job, jobs.Attempt, error) {
	c.cancel()
	return c.Store.CompleteAttempt(ctx, x)
}

func (c cancelling) UpdateAttempt(ctx context.Context, u jobs.AttemptUpdate) (jobs.Attempt, error) {
	c.cancel()
	return c.Store.UpdateAttempt(ctx, u)
}

func (c cancelling) CloseJob(ctx context.Context, x jobs.JobClose) (jobs.Job, error) {
	c.cancel()
	return c.Store.CloseJob(ctx, x)
}

// TestOutcomeWritesSurviveCancellation cancels the caller's context while
// each outcome write is under way: the write still takes effect.
func TestOutcomeWritesSurviveCancellation(t *testing.T) {
	t.Parallel()
	for _, d := range allDialects() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			store := d.open(t)
			plain, err := jobs.New(store, jobs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			setup := func(key string) (jobs.Job, jobs.Attempt) {
				j, _, err := plain.Submit(context.Background(), submitReq(key))
				if err != nil {
					t.Fatal(err)
				}
				a, err := plain.StartAttempt(context.Background(), j.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				return j, a
			}
			for _, tt := range []struct {
				name string
				do   func(ctx context.Context, m *jobs.Manager, j jobs.Job, a jobs.Attempt) error
				want func(j jobs.Job, a jobs.Attempt) bool
			}{
				{"complete", func(ctx context.Context, m *jobs.Manager, _ jobs.Job, a jobs.Attempt) error {
					_, err := m.Complete(ctx, a.ID, json.RawMessage(`"paid"`))
					return err
				}, func(j jobs.Job, a jobs.Attempt) bool {
					return j.State == jobs.JobSucceeded && a.State == jobs.AttemptSucceeded
				}},
				{"mark running", func(ctx context.Context, m *jobs.Manager, _ jobs.Job, a jobs.Attempt) error {
					_, err := m.MarkRunning(ctx, a.ID, "ref")
					return err
				}, func(_ jobs.Job, a jobs.Attempt) bool { return a.State == jobs.AttemptRunning && a.ProviderRef == "ref" }},
				{"fail", func(ctx context.Context, m *jobs.Manager, _ jobs.Job, a jobs.Attempt) error {
					_, err := m.Fail(ctx, a.ID, "no")
					return err
				}, func(_ jobs.Job, a jobs.Attempt) bool { return a.State == jobs.AttemptFailed }},
				{"cancel job", func(ctx context.Context, m *jobs.Manager, j jobs.Job, _ jobs.Attempt) error {
					_, err := m.CancelJob(ctx, j.ID, "stop")
					return err
				}, func(j jobs.Job, _ jobs.Attempt) bool { return j.State == jobs.JobCancelled }},
			} {
				t.Run(tt.name, func(t *testing.T) {
					j, a := setup("cancel-" + tt.name)
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					m, err := jobs.New(cancelling{Store: store, cancel: cancel}, jobs.Options{})
					if err != nil {
						t.Fatal(err)
					}
					if err := tt.do(ctx, m, j, a); err != nil {
						t.Fatalf("write with a context cancelled under way: %v", err)
					}
					if ctx.Err() == nil {
						t.Fatal("the caller's context was not cancelled")
					}
					gotJ, _ := store.Job(context.Background(), j.ID)
					gotA, _ := store.Attempt(context.Background(), a.ID)
					if !tt.want(gotJ, gotA) {
						t.Fatalf("write lost: job %s, attempt %s", gotJ.State, gotA.State)
					}
				})
			}
		})
	}
}
