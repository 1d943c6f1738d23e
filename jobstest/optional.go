package jobstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/intentjobs/jobs"
)

// The optional capabilities a store may implement, each proved by a case
// that skips when the store lacks it.

var summaryContract = func(version string) map[string]jobs.Contract {
	return map[string]jobs.Contract{"summarize": {Version: version, Validate: func(r json.RawMessage) error {
		var v struct {
			Summary string `json:"summary"`
		}
		if err := json.Unmarshal(r, &v); err != nil || v.Summary == "" {
			return errors.New("no summary")
		}
		return nil
	}}}
}

func testVerificationStore(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore, func(o *jobs.Options) { o.Contracts = summaryContract("v1") })
	good := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"summary":"ok"}`), nil }
	bad := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"text":"ok"}`), nil }
	newJob := func(m *jobs.Manager) jobs.Job {
		j, _, err := m.Submit(e.ctx, jobs.SubmitRequest{Owner: "o", Key: "k-" + randomHex(4), Kind: "summarize",
			Provider: "primary", Params: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	failover := func(m *jobs.Manager) error {
		_, err := m.StartAttempt(e.ctx, newJob(m).ID, "fallback")
		return err
	}

	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover to a never-verified provider = %v, want ErrProviderUnverified", err)
	}
	if _, err := e.m.StartAttempt(e.ctx, newJob(e.m).ID, "primary"); err != nil {
		t.Fatalf("the job's own provider needs no verification: %v", err)
	}
	v, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", good, jobs.ValidFor(time.Hour))
	if err != nil || !v.Passed || v.ContractVersion != "v1" {
		t.Fatalf("VerifyProvider = %+v, %v; want a pass at v1", v, err)
	}
	if err := failover(e.m); err != nil {
		t.Fatalf("failover after a passing verification = %v", err)
	}

	e.clock.Advance(2 * time.Hour)
	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover after the verification expired = %v, want ErrProviderUnverified", err)
	}
	if _, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", good); err != nil {
		t.Fatal(err)
	}
	v2, err := jobs.New(e.store, jobs.Options{Clock: e.clock, Logger: discardLogger(), Contracts: summaryContract("v2")})
	if err != nil {
		t.Fatal(err)
	}
	if err := failover(v2); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover under a new contract version = %v, want ErrProviderUnverified", err)
	}
	e.clock.Advance(time.Second)
	if v, err := e.m.VerifyProvider(e.ctx, "fallback", "summarize", bad); err != nil || v.Passed {
		t.Fatalf("VerifyProvider with off-contract output = %+v, %v; want a recorded failure", v, err)
	}
	if err := failover(e.m); !errors.Is(err, jobs.ErrProviderUnverified) {
		t.Fatalf("failover after a failed verification = %v, want ErrProviderUnverified (the latest decides)", err)
	}
	list, err := e.m.Verifications(e.ctx, jobs.VerificationFilter{Provider: "fallback", Kind: "summarize"})
	if err != nil || len(list) != 3 {
		t.Fatalf("Verifications = %d, %v; want 3", len(list), err)
	}
	if list[0].Passed || !list[1].Passed {
		t.Errorf("Verifications not newest first: %+v", list)
	}
}

func testPurgeStore(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	closedOld := e.newJob()
	a := e.start(closedOld.ID, "")
	if _, err := e.m.Complete(e.ctx, a.ID, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	cancelledOld := e.newJob()
	inFlight := e.running(cancelledOld.ID) // an attempt still open keeps its job
	if _, err := e.m.CancelJob(e.ctx, cancelledOld.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	openOld := e.newJob()
	e.clock.Advance(3 * time.Hour)
	closedRecent := e.newJob()
	if _, err := e.m.FailJob(e.ctx, closedRecent.ID, "gave up"); err != nil {
		t.Fatal(err)
	}

	dry, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour, DryRun: true})
	if err != nil || dry.Jobs != 1 || dry.Attempts != 1 {
		t.Fatalf("dry run = %+v, %v; want 1 job and 1 attempt", dry, err)
	}
	if got := e.countJobs(); got != 4 {
		t.Fatalf("a dry run deleted: %d jobs left, want 4", got)
	}
	res, err := e.m.Purge(e.ctx, jobs.PurgeOptions{Retention: time.Hour})
	if err != nil || res.Jobs != 1 || res.Attempts != 1 {
		t.Fatalf("Purge = %+v, %v; want 1 job and its attempt", res, err)
	}
	if _, err := e.m.Get(e.ctx, closedOld.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("the old closed job is still there: %v", err)
	}
	for _, keep := range []jobs.Job{cancelledOld, openOld, closedRecent} {
		if _, err := e.m.Get(e.ctx, keep.ID); err != nil {
			t.Errorf("job %s (%s) was purged: %v", keep.ID, keep.Key, err)
		}
	}
	if got := e.attempt(inFlight.ID); got.State != jobs.AttemptRunning {
		t.Errorf("the open attempt of a cancelled job is %s", got.State)
	}
	again, created, err := e.m.Submit(e.ctx, req(closedOld.Owner, closedOld.Key))
	if err != nil || !created || again.ID == closedOld.ID {
		t.Fatalf("resubmitting a purged key = %s, created=%v, %v; want a new job", again.ID, created, err)
	}
	e.checkInvariants()
}

func testReconcileStore(t *testing.T, newStore func(t testing.TB) jobs.Store) {
	e := setup(t, newStore)
	rs := e.store
	unknown := e.running(e.newJob().ID)
	if _, err := e.m.MarkUnknown(e.ctx, unknown.ID, "timeout"); err != nil {
		t.Fatal(err)
	}
	starting := e.start(e.newJob().ID, "")
	done := e.start(e.newJob().ID, "")
	e.m.Fail(e.ctx, done.ID, "declined")
	e.clock.Advance(time.Minute)
	fresh := e.start(e.newJob().ID, "")

	stale, err := rs.StaleAttempts(e.ctx, jobs.StaleQuery{UnknownBefore: e.clock.Now(), OpenBefore: fresh.CreatedAt, Limit: 10})
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
	if _, ok, err := rs.ClaimAttempt(e.ctx, jobs.AttemptClaim{ID: done.ID, State: jobs.AttemptStarting,
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
		as[i], claimed[i], errs[i] = rs.ClaimAttempt(e.ctx, claim(fmt.Sprintf("clm_racer%d", i), now, lease))
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
		as, err := rs.StaleAttempts(e.ctx, q)
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
	if _, ok, err := rs.ClaimAttempt(e.ctx, claim("clm_early", lease.Add(-time.Microsecond), lease.Add(time.Minute))); ok || err != nil {
		t.Errorf("a claim before the lease ended = %v, %v; want false", ok, err)
	}
	second := "clm_takeover"
	if _, ok, err := rs.ClaimAttempt(e.ctx, claim(second, lease, lease.Add(time.Minute))); !ok || err != nil {
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
	if ok, err := rs.RenewClaim(e.ctx, jobs.AttemptClaim{ID: target.ID, Token: first, Until: lease.Add(time.Hour)}); ok || err != nil {
		t.Errorf("RenewClaim with a taken-over claim = %v, %v; want false", ok, err)
	}
	if a, j := e.attempt(target.ID), e.job(target.JobID); !cmp.Equal(a, before) || !cmp.Equal(j, beforeJob) {
		t.Errorf("refused writes changed the attempt or its job:\n%s%s", cmp.Diff(before, a), cmp.Diff(beforeJob, j))
	}

	// The holder renews its claim (to look again sooner), then resolves.
	soon := lease.Add(10 * time.Second)
	if ok, err := rs.RenewClaim(e.ctx, jobs.AttemptClaim{ID: target.ID, Token: second, Until: soon}); !ok || err != nil {
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
	if _, ok, err := rs.ClaimAttempt(e.ctx, hc); !ok || err != nil {
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
