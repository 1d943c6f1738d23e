package jobstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// testReconcile proves StaleAttempts, ClaimAttempt and RenewClaim, and the
// claim tokens of UpdateAttempt and CompleteAttempt: racing claims, leases,
// take-overs, and a runner's result winning over a reconciler's claim.
func testReconcile(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	unknown := e.running(e.newJob().ID)
	if _, err := e.m.MarkUnknown(e.ctx, unknown.ID, "timeout"); err != nil {
		t.Fatal(err)
	}
	starting := e.start(e.newJob().ID, "")
	done := e.start(e.newJob().ID, "")
	e.m.Fail(e.ctx, done.ID, "declined")
	e.clock.Advance(time.Minute)
	fresh := e.start(e.newJob().ID, "")

	stale, err := e.claims().StaleAttempts(e.ctx, jobs.StaleQuery{UnknownBefore: e.clock.Now(), OpenBefore: fresh.CreatedAt, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]jobs.Attempt{}
	for _, a := range stale {
		got[a.ID] = a
	}
	if len(got) != 2 || got[unknown.ID].ID == "" || got[starting.ID].ID == "" {
		t.Fatalf("StaleAttempts = %v; want the unknown and the old starting attempt only", stale)
	}
	if _, ok, err := e.claims().ClaimAttempt(e.ctx, jobs.AttemptClaim{ID: done.ID, State: jobs.AttemptStarting,
		UpdatedAt: done.UpdatedAt, Token: "clm_done", At: e.clock.Now(), Until: e.clock.Now().Add(time.Minute)}); ok || err != nil {
		t.Errorf("ClaimAttempt on a failed attempt = %v, %v; want false", ok, err)
	}

	// Racing claims: exactly one of them holds the attempt.
	target := got[unknown.ID]
	now := e.clock.Now()
	lease := now.Add(time.Minute)
	claim := func(token string, at, until time.Time) jobs.AttemptClaim {
		return jobs.AttemptClaim{ID: target.ID, State: target.State, UpdatedAt: target.UpdatedAt, Token: token, At: at, Until: until}
	}
	const racers = 8
	errs := make([]error, racers)
	claimed := make([]bool, racers)
	as := make([]jobs.Attempt, racers)
	release(racers, func(i int) {
		as[i], claimed[i], errs[i] = e.claims().ClaimAttempt(e.ctx, claim(fmt.Sprintf("clm_racer%d", i), now, lease))
	})
	first := ""
	for i := range claimed {
		if errs[i] != nil {
			t.Fatalf("ClaimAttempt: %v", errs[i])
		}
		if claimed[i] {
			if first != "" {
				t.Errorf("claims %s and racer %d both hold the attempt", first, i)
			}
			first = fmt.Sprintf("clm_racer%d", i)
			if as[i].ID != target.ID || as[i].State != jobs.AttemptUnknown {
				t.Errorf("the claimed attempt = %+v", as[i])
			}
		}
	}
	if first == "" {
		t.Fatal("none of the racing claims won")
	}

	// A claimed attempt is left out of the reconcilers' list until its
	// lease ends, and stays in the operators' list.
	listed := func(q jobs.StaleQuery) bool {
		t.Helper()
		q.UnknownBefore, q.OpenBefore, q.Limit = now.Add(time.Hour), fresh.CreatedAt, 10
		as, err := e.claims().StaleAttempts(e.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.ID == target.ID {
				return true
			}
		}
		return false
	}
	if listed(jobs.StaleQuery{UnclaimedAt: now}) || !listed(jobs.StaleQuery{UnclaimedAt: lease}) || !listed(jobs.StaleQuery{}) {
		t.Errorf("a claimed attempt is listed during its lease, or not after it, or not for operators")
	}

	// The lease holds to its end; then another claim takes the attempt over.
	if _, ok, err := e.claims().ClaimAttempt(e.ctx, claim("clm_early", lease.Add(-time.Microsecond), lease.Add(time.Minute))); ok || err != nil {
		t.Errorf("a claim before the lease ended = %v, %v; want false", ok, err)
	}
	second := "clm_takeover"
	if _, ok, err := e.claims().ClaimAttempt(e.ctx, claim(second, lease, lease.Add(time.Minute))); !ok || err != nil {
		t.Fatalf("a claim once the lease ended = %v, %v; want true", ok, err)
	}

	// The first claim's writes are refused and write nothing.
	before, beforeJob := e.attempt(target.ID), e.job(target.JobID)
	_, err = e.store.UpdateAttempt(e.ctx, jobs.AttemptUpdate{ID: target.ID, From: []jobs.AttemptState{jobs.AttemptUnknown},
		To: jobs.AttemptCancelled, Reason: "late answer", ClaimToken: first, At: e.clock.Now()})
	if !errors.Is(err, jobs.ErrClaimLost) {
		t.Errorf("UpdateAttempt with a taken-over claim = %v, want ErrClaimLost", err)
	}
	_, _, err = e.store.CompleteAttempt(e.ctx, jobs.Completion{AttemptID: target.ID, Result: json.RawMessage(`{"late":true}`),
		ClaimToken: first, At: e.clock.Now()})
	if !errors.Is(err, jobs.ErrClaimLost) {
		t.Errorf("CompleteAttempt with a taken-over claim = %v, want ErrClaimLost", err)
	}
	if ok, err := e.claims().RenewClaim(e.ctx, jobs.AttemptClaim{ID: target.ID, Token: first, Until: lease.Add(time.Hour)}); ok || err != nil {
		t.Errorf("RenewClaim with a taken-over claim = %v, %v; want false", ok, err)
	}
	if a, j := e.attempt(target.ID), e.job(target.JobID); !cmp.Equal(a, before) || !cmp.Equal(j, beforeJob) {
		t.Errorf("refused writes changed the attempt or its job:\n%s%s", cmp.Diff(before, a), cmp.Diff(beforeJob, j))
	}

	// The holder renews its claim (to look again sooner), then resolves.
	soon := lease.Add(10 * time.Second)
	if ok, err := e.claims().RenewClaim(e.ctx, jobs.AttemptClaim{ID: target.ID, Token: second, Until: soon}); !ok || err != nil {
		t.Errorf("RenewClaim by the holder = %v, %v; want true", ok, err)
	}
	if listed(jobs.StaleQuery{UnclaimedAt: soon.Add(-time.Microsecond)}) || !listed(jobs.StaleQuery{UnclaimedAt: soon}) {
		t.Errorf("a renewed claim is not listed from its new end on")
	}
	j, a, err := e.store.CompleteAttempt(e.ctx, jobs.Completion{AttemptID: target.ID, Result: json.RawMessage(`{"looked_up":true}`),
		ClaimToken: second, At: e.clock.Now()})
	if err != nil || a.State != jobs.AttemptSucceeded || j.CompletedBy != target.ID {
		t.Errorf("CompleteAttempt by the holder = %s, %s, %v; want succeeded", a.State, j.CompletedBy, err)
	}
	// Resolved: the holder's next write is a transition error, not a lost claim.
	if _, err := e.store.UpdateAttempt(e.ctx, jobs.AttemptUpdate{ID: target.ID, From: []jobs.AttemptState{jobs.AttemptUnknown},
		To: jobs.AttemptFailed, ClaimToken: second, At: e.clock.Now()}); !errors.Is(err, jobs.ErrInvalidTransition) {
		t.Errorf("UpdateAttempt by the holder of a resolved attempt = %v, want ErrInvalidTransition", err)
	}

	// Writes without a token, a runner's, ignore claims: a real result wins
	// over a reconciler's claim, which then finds the attempt resolved.
	held := got[starting.ID]
	hc := jobs.AttemptClaim{ID: held.ID, State: held.State, UpdatedAt: held.UpdatedAt, Token: "clm_held", At: now, Until: lease}
	if _, ok, err := e.claims().ClaimAttempt(e.ctx, hc); !ok || err != nil {
		t.Fatalf("ClaimAttempt = %v, %v", ok, err)
	}
	if _, err := e.m.Complete(e.ctx, held.ID, json.RawMessage(`{"runner":true}`)); err != nil {
		t.Errorf("a runner's Complete on a claimed attempt = %v, want success", err)
	}
	if _, _, err := e.store.CompleteAttempt(e.ctx, jobs.Completion{AttemptID: held.ID, Result: json.RawMessage(`{"looked_up":true}`),
		ClaimToken: hc.Token, At: e.clock.Now()}); !errors.Is(err, jobs.ErrInvalidTransition) {
		t.Errorf("the claim holder's CompleteAttempt after the runner's = %v, want ErrInvalidTransition", err)
	}
	if j := e.job(held.JobID); string(j.Result) != `{"runner":true}` {
		t.Errorf("job result %s, want the runner's", j.Result)
	}
	e.checkInvariants()
}

// testClaimRefusals calls the ClaimStore directly, as a reconciler would
// not: a claim without a token is bad input, a closed attempt is never
// claimed, and a write presenting such a claim is refused.
func testClaimRefusals(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	terminal := []jobs.AttemptState{jobs.AttemptSucceeded, jobs.AttemptLost, jobs.AttemptFailed, jobs.AttemptCancelled}

	// Each terminal attempt, and an open one.
	ended := make(map[jobs.AttemptState]jobs.Attempt)
	for _, s := range terminal {
		ended[s] = e.attemptIn(s)
	}
	live := e.attemptIn(jobs.AttemptRunning)
	e.clock.Advance(1)

	t.Run("a claim without a token is an InputError and writes nothing", func(t *testing.T) {
		e := e.with(t)
		now := e.clock.Now()
		// A claim without a token could not be told from a runner's writes.
		tests := []struct {
			name string
			call func() error
		}{
			{"ClaimAttempt without a token", func() error {
				_, _, err := e.claims().ClaimAttempt(e.ctx, jobs.AttemptClaim{ID: live.ID, State: live.State,
					UpdatedAt: live.UpdatedAt, At: now, Until: now.Add(1e9)})
				return err
			}},
			{"RenewClaim without a token", func() error {
				_, err := e.claims().RenewClaim(e.ctx, jobs.AttemptClaim{ID: live.ID, Until: now.Add(1e9)})
				return err
			}},
		}
		for _, tt := range tests {
			before := e.snapshot()
			err := tt.call()
			var in *jobs.InputError
			if !errors.Is(err, jobs.ErrInvalidInput) || !errors.As(err, &in) || in.Field != "Token" {
				t.Errorf("%s: got %v, want an *InputError for Token", tt.name, err)
			}
			e.unchanged(before, tt.name)
		}
	})

	t.Run("only an open attempt is claimed", func(t *testing.T) {
		e := e.with(t)
		now := e.clock.Now()
		for _, s := range terminal {
			a := ended[s]
			before := e.snapshot()
			got, ok, err := e.claims().ClaimAttempt(e.ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
				Token: "tok-" + string(s), At: now, Until: now.Add(60e9)})
			if ok || err != nil || got.ID != "" {
				t.Errorf("ClaimAttempt on a %s attempt = %s, %v, %v; want nothing claimed", s, got.ID, ok, err)
			}
			e.unchanged(before, "a claim of a "+string(s)+" attempt")
			// A write presenting that claim is refused: there is none.
			if _, err := e.store.UpdateAttempt(e.ctx, jobs.AttemptUpdate{ID: a.ID, From: []jobs.AttemptState{s},
				To: jobs.AttemptCancelled, ClaimToken: "tok-" + string(s), At: now}); !errors.Is(err, jobs.ErrClaimLost) {
				t.Errorf("a write with the refused claim on a %s attempt = %v, want ErrClaimLost", s, err)
			}
		}
	})
}
