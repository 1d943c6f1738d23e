package linearcheck_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/memstore"
)

// Races driven on the store directly, without a Manager: reconcilers'
// claims on one attempt, with leases that run out and are taken over,
// against a runner's result and an operator's cancel; and submits inside
// callers' transactions that commit or roll back.

// raceClaims: on each of n attempts in doubt, a reconciler claims the
// attempt with a lease that runs out; then four others race to take it
// over, against a runner's result or an operator's cancel; then each
// one holding a claim renews it and resolves the attempt with its token,
// racing the first reconciler's late answer (refused: its claim was taken
// over) and a last reconciler's claim.
func raceClaims(t *testing.T, r *run, n int) {
	ctx := context.Background()
	m := r.manager("setup", options)
	type claimStore interface {
		jobs.Store
		jobs.ClaimStore
	}
	stores := make([]claimStore, 7)
	for i := range stores {
		stores[i] = r.store(fmt.Sprintf("direct-%d", i)).(claimStore)
	}
	var first, tookOver int
	defer func() {
		t.Logf("%d attempts: %d claimed first, %d taken over", n, first, tookOver)
		if first == 0 || tookOver == 0 {
			t.Error("the claims raced for nothing")
		}
	}()
	for i := range n {
		j := submit(t, m, fmt.Sprintf("claims-%d", i), jobs.KeyReuseNever)
		a := running(t, m, j.ID)
		if a, err := m.MarkUnknown(ctx, a.ID, "timeout"); err != nil {
			t.Fatal(err)
		} else if i%2 == 1 {
			m.MarkRunning(ctx, a.ID, "late-ref") // an unknown attempt learns its reference
		}
		a, err := m.Attempt(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		old := fmt.Sprintf("clm_%d_old", i)
		if _, ok, _ := stores[6].ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
			Token: old, At: now.Add(-2 * time.Second), Until: now.Add(-time.Second)}); ok {
			first++
		}
		tokens := make([]string, 4)
		claimed := make([]bool, 4)
		release(6, func(k int) {
			s := stores[k]
			switch k {
			case 0, 1, 2, 3:
				tokens[k] = fmt.Sprintf("clm_%d_%d", i, k)
				_, claimed[k], _ = s.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
					Token: tokens[k], At: now, Until: now.Add(time.Minute)})
			case 4:
				if i%3 == 0 {
					s.CompleteAttempt(ctx, jobs.Completion{AttemptID: a.ID, Result: json.RawMessage(`{"runner":true}`), At: now})
				}
			case 5:
				if i%3 == 1 {
					s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: a.ID, From: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown},
						To: jobs.AttemptCancelled, Reason: "operator", At: now})
				}
			}
		})
		for _, ok := range claimed {
			if ok {
				tookOver++
			}
		}
		later := now.Add(time.Second)
		release(7, func(k int) {
			s := stores[k]
			switch {
			case k == 4: // a last reconciler, once the leases ran out
				if cur, err := s.Attempt(ctx, a.ID); err == nil {
					s.ClaimAttempt(ctx, jobs.AttemptClaim{ID: a.ID, State: cur.State, UpdatedAt: cur.UpdatedAt,
						Token: fmt.Sprintf("clm_%d_last", i), At: later.Add(2 * time.Minute), Until: later.Add(3 * time.Minute)})
				}
			case k == 6: // the first reconciler answers late
				s.CompleteAttempt(ctx, jobs.Completion{AttemptID: a.ID, Result: json.RawMessage(`{"late":true}`), At: later, ClaimToken: old})
			case k < 4 && claimed[k]:
				s.RenewClaim(ctx, jobs.AttemptClaim{ID: a.ID, Token: tokens[k], Until: later.Add(time.Minute)})
				if k%2 == 0 {
					s.CompleteAttempt(ctx, jobs.Completion{AttemptID: a.ID, Result: json.RawMessage(fmt.Sprintf(`{"claimer":%d}`, k)),
						At: later, ClaimToken: tokens[k]})
				} else {
					s.UpdateAttempt(ctx, jobs.AttemptUpdate{ID: a.ID, From: []jobs.AttemptState{jobs.AttemptUnknown, jobs.AttemptRunning},
						To: jobs.AttemptFailed, Reason: "declined", At: later, ClaimToken: tokens[k]})
				}
			}
		})
		m.Attempts(ctx, j.ID)
		m.Get(ctx, j.ID)
	}
}

func TestClaimsMemstore(t *testing.T) {
	t.Parallel()
	r := newRun(t, memstore.New())
	raceClaims(t, r, 12)
	r.mustBeLinearizable()
}

func TestClaimsSQLite(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewSQLite(t))
	raceClaims(t, r, 12)
	r.mustBeLinearizable()
}

func TestClaimsPostgres(t *testing.T) {
	t.Parallel()
	r := newRun(t, testdb.NewPostgres(t))
	raceClaims(t, r, 12)
	r.mustBeLinearizable()
}

// raceSubmitTx races, on each of n keys, two Submits in transactions of
// their own (one commits, one rolls back) and a plain Submit, then
// starts an attempt on what the key holds.
func raceSubmitTx(t *testing.T, r *run, db *sql.DB, n int) {
	ctx := context.Background()
	ms := []*jobs.Manager{r.manager("tx-0", options), r.manager("tx-1", options), r.manager("plain", options)}
	for i := range n {
		req := jobs.SubmitRequest{Owner: "tenant", Key: fmt.Sprintf("tx-%d", i), Kind: "charge", Provider: "p", Params: json.RawMessage(`{}`)}
		release(3, func(k int) {
			if k == 2 {
				ms[k].Submit(ctx, req)
				return
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return
			}
			defer tx.Rollback()
			if _, _, err := ms[k].SubmitTx(ctx, tx, req); err == nil && k == 0 {
				tx.Commit()
			}
		})
		if j, err := ms[2].GetByKey(ctx, "tenant", req.Key); err == nil {
			ms[2].StartAttempt(ctx, j.ID, "")
		}
	}
}

func TestSubmitTxSQLite(t *testing.T) {
	t.Parallel()
	s := testdb.NewSQLite(t)
	r := newRun(t, s)
	raceSubmitTx(t, r, s.DB(), 10)
	res := r.mustBeLinearizable()
	if res.Ambiguous == 0 {
		t.Error("no CreateJobTx recorded")
	}
}

func TestSubmitTxPostgres(t *testing.T) {
	t.Parallel()
	s := testdb.NewPostgres(t)
	r := newRun(t, s)
	raceSubmitTx(t, r, s.DB(), 10)
	r.mustBeLinearizable()
}
