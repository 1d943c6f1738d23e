package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/invariant"
	"github.com/intentjobs/jobs/jobstest"
	"github.com/intentjobs/jobs/memstore"
)

var (
	twinRuns = flag.Int("twin.runs", 100, "TestAnswersAsTheSQLStores: runs per SQL store")
	twinSeed = flag.Uint64("twin.seed", 0, "TestAnswersAsTheSQLStores: the seed of the runs (0: a new one)")
)

// TestAnswersAsTheSQLStores drives a memory store and a SQL store (SQLite,
// and PostgreSQL when JOBS_TEST_POSTGRES_DSN is set) with the same random
// sequences of calls on one clock: the Manager's verbs, purges,
// verifications, and a reconciler's claims and writes. Every answer (value
// and error) must be the same, and so must everything stored after each
// step, but for the IDs, which are random and compared by order of
// appearance. A failure names its seed and the steps that led to it; run
// them again with -twin.seed, or more of them with -twin.runs (-short
// makes 10).
func TestAnswersAsTheSQLStores(t *testing.T) {
	seed, runs := *twinSeed, *twinRuns
	if seed == 0 {
		seed = rand.Uint64()
	}
	if testing.Short() {
		runs = min(runs, 10)
	}
	if !testdb.Long() && !isSet("twin.runs") {
		runs = min(runs, 8)
	}
	for _, sql := range []struct {
		name string
		open func(t *testing.T) jobs.SQLStore
	}{
		{"sqlite", func(t *testing.T) jobs.SQLStore { return testdb.NewSQLiteAt(t, ":memory:") }},
		{"postgres", func(t *testing.T) jobs.SQLStore { return testdb.NewPostgres(t) }},
	} {
		t.Run(sql.name, func(t *testing.T) {
			t.Parallel()
			db := sql.open(t)
			for run := range runs {
				empty(t, db)
				w := newTwin(t, memstore.New(), db, sql.name, rand.New(rand.NewPCG(seed, uint64(run))))
				w.play(20 + w.r.IntN(60))
				if t.Failed() {
					t.Fatalf("run %d of -twin.seed=%d failed after these steps:\n%s", run, seed, strings.Join(w.log, "\n"))
				}
			}
		})
	}
}

// empty deletes everything the SQL store holds, so that each run starts
// from an empty store as the memory store does.
func empty(t *testing.T, s jobs.SQLStore) {
	t.Helper()
	for _, table := range []string{"intentjobs_attempts", "intentjobs_jobs", "intentjobs_verifications"} {
		if _, err := s.DB().ExecContext(context.Background(), "DELETE FROM "+table); err != nil {
			t.Fatalf("empty %s: %v", table, err)
		}
	}
}

// twin is two stores, each behind its own Manager, on one clock, and the
// random source that chooses what to do with them.
type twin struct {
	t     *testing.T
	r     *rand.Rand
	ctx   context.Context
	clock *jobstest.Clock
	sides [2]*side // the memory store, then the SQL store

	keys   []string            // the keys submitted so far
	claims []claim             // the claims taken so far
	log    []string            // the steps made so far, for the report of a failure
	prev   *invariant.Snapshot // the memory store after the last step
}

// claim is a claim taken on the attempt of rank attempt.
type claim struct {
	attempt int
	token   string
}

// side is one store and what the calls so far made in it.
type side struct {
	name     string
	store    testdb.Store
	m        *jobs.Manager
	jobs     map[string]string // job IDs by key
	attempts []string          // attempt IDs, in order of creation
	aliases  map[string]string // ID → its name in descriptions: job#1, att#2, …
}

// chargeContract accepts a result with a "charged" field.
var chargeContract = jobs.Contract{Version: "v1", Validate: func(r json.RawMessage) error {
	var v struct{ Charged *int }
	if json.Unmarshal(r, &v) != nil || v.Charged == nil {
		return errors.New(`no "charged" field`)
	}
	return nil
}}

func newTwin(t *testing.T, mem, sql testdb.Store, sqlName string, r *rand.Rand) *twin {
	w := &twin{t: t, r: r, ctx: context.Background(), clock: jobstest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))}
	for i, s := range []testdb.Store{mem, sql} {
		m := jobstest.NewManager(t, s, jobs.Options{Clock: w.clock, Logger: slog.New(slog.DiscardHandler),
			Contracts: map[string]jobs.Contract{"charge": chargeContract, "refund": chargeContract}})
		w.sides[i] = &side{name: []string{"memstore", sqlName}[i], store: s, m: m,
			jobs: map[string]string{}, aliases: map[string]string{}}
	}
	return w
}

// play submits a job, then makes n random steps, comparing the stores
// after each, and stops at the first difference.
func (w *twin) play(n int) {
	w.log = append(w.log, "Submit")
	w.Submit()
	for range n {
		s := w.step()
		w.log = append(w.log, s.name)
		s.do(w)
		w.check()
		if w.t.Failed() {
			return
		}
	}
}

// step is one kind of call a run makes, and how often it is made.
type step struct {
	name   string
	do     func(w *twin)
	weight int
}

// steps are weighted so that attempts start, run and race more often than
// jobs close, which ends their races.
var steps = []step{
	{"Submit", (*twin).Submit, 4},
	{"StartAttempt", (*twin).StartAttempt, 8},
	{"Hedge", (*twin).Hedge, 4},
	{"MarkRunning", (*twin).MarkRunning, 6},
	{"MarkUnknown", (*twin).MarkUnknown, 3},
	{"Complete", (*twin).Complete, 5},
	{"Fail", (*twin).Fail, 2},
	{"Cancel", (*twin).Cancel, 2},
	{"FailJob", (*twin).FailJob, 1},
	{"CancelJob", (*twin).CancelJob, 1},
	{"Advance", (*twin).Advance, 2},
	{"VerifyProvider", (*twin).VerifyProvider, 2},
	{"Verifications", (*twin).Verifications, 1},
	{"Purge", (*twin).Purge, 1},
	{"PurgeJobs", (*twin).PurgeJobs, 1},
	{"StaleAttempts", (*twin).StaleAttempts, 2},
	{"ClaimAttempt", (*twin).ClaimAttempt, 4},
	{"RenewClaim", (*twin).RenewClaim, 2},
	{"ReconcilerWrite", (*twin).ReconcilerWrite, 4},
}

// step draws the next step, each in proportion to its weight.
func (w *twin) step() step {
	total := 0
	for _, s := range steps {
		total += s.weight
	}
	n := w.r.IntN(total)
	for _, s := range steps {
		if n < s.weight {
			return s
		}
		n -= s.weight
	}
	panic("unreachable")
}

// compare makes the same call on both sides, each call at a millisecond
// of its own (so that no two writes tie on time, and IDs, which begin with
// it, sort alike in both stores), and fails the test unless both answer
// alike.
func (w *twin) compare(op string, call func(s *side) (any, error)) {
	w.clock.Advance(time.Millisecond)
	var got [2]string
	for i, s := range w.sides {
		v, err := call(s)
		got[i] = s.describe(v, err)
	}
	if got[0] != got[1] {
		w.t.Errorf("%s answered differently:\n%-8s %s\n%-8s %s", op, w.sides[0].name, got[0], w.sides[1].name, got[1])
	}
}

var idPattern = regexp.MustCompile(`\b(job|att|ver)_[0-9A-Z]{26}\b`)

// describe renders an answer as JSON, with every ID replaced by its name
// in order of appearance on this side.
func (s *side) describe(v any, err error) string {
	b, jerr := json.Marshal(struct {
		Value any
		Err   *errorDesc `json:",omitempty"`
	}{v, describeError(err)})
	if jerr != nil {
		return "cannot describe: " + jerr.Error()
	}
	return idPattern.ReplaceAllStringFunc(string(b), func(id string) string {
		if _, ok := s.aliases[id]; !ok {
			s.aliases[id] = fmt.Sprintf("%s#%d", id[:3], len(s.aliases)+1)
		}
		return s.aliases[id]
	})
}

// errorDesc is what callers can learn from an error: the sentinels it
// matches and the typed error it holds. Messages are left out: a store
// words its own.
type errorDesc struct {
	Matches []string
	Typed   any
}

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrNotFound", jobs.ErrNotFound}, {"ErrKeyConflict", jobs.ErrKeyConflict},
	{"ErrAttemptInFlight", jobs.ErrAttemptInFlight}, {"ErrLostRace", jobs.ErrLostRace},
	{"ErrInvalidTransition", jobs.ErrInvalidTransition}, {"ErrJobClosed", jobs.ErrJobClosed},
	{"ErrProviderUnverified", jobs.ErrProviderUnverified}, {"ErrContractViolation", jobs.ErrContractViolation},
	{"ErrInvalidInput", jobs.ErrInvalidInput}, {"ErrStorage", jobs.ErrStorage}, {"ErrClaimLost", jobs.ErrClaimLost},
}

var typedErrors = []func(error) (any, bool){
	as[*jobs.KeyConflictError], as[*jobs.AttemptInFlightError], as[*jobs.LostRaceError],
	as[*jobs.TransitionError], as[*jobs.JobClosedError], as[*jobs.InputError],
	as[*jobs.ProviderUnverifiedError], as[*jobs.ContractViolationError], as[*jobs.StorageError],
}

func as[E error](err error) (any, bool) {
	var e E
	ok := errors.As(err, &e)
	return e, ok
}

func describeError(err error) *errorDesc {
	if err == nil {
		return nil
	}
	d := &errorDesc{}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			d.Matches = append(d.Matches, s.name)
		}
	}
	for _, typed := range typedErrors {
		if e, ok := typed(err); ok {
			d.Typed = e
			break
		}
	}
	if d.Matches == nil && d.Typed == nil {
		d.Typed = fmt.Sprintf("untyped %T", err) // differs from any typed answer
	}
	return d
}

func (w *twin) now() time.Time { return w.clock.Now().UTC() }

// oneOf returns one of choices, at random.
func oneOf[T any](w *twin, choices ...T) T { return choices[w.r.IntN(len(choices))] }

// job returns the key of one of the jobs submitted so far, seven times in
// eight an open one when there is one, or "" if there is none.
func (w *twin) job() string {
	mem := w.sides[0]
	var open []string
	for _, key := range w.keys {
		if j, err := mem.store.Job(w.ctx, mem.jobs[key]); err == nil && !j.State.Terminal() {
			open = append(open, key)
		}
	}
	switch {
	case len(open) > 0 && w.r.IntN(8) > 0:
		return oneOf(w, open...)
	case len(w.keys) > 0:
		return oneOf(w, w.keys...)
	}
	return ""
}

// attempt returns the rank of one of the attempts made so far, seven
// times in eight one in a state of prefer when there is one (a call that
// may change it), and false if there is none.
func (w *twin) attempt(prefer ...jobs.AttemptState) (int, bool) {
	mem := w.sides[0]
	var preferred []int
	for i, id := range mem.attempts {
		if a, err := mem.store.Attempt(w.ctx, id); err == nil && slices.Contains(prefer, a.State) {
			preferred = append(preferred, i)
		}
	}
	switch {
	case len(preferred) > 0 && w.r.IntN(8) > 0:
		return oneOf(w, preferred...), true
	case len(mem.attempts) > 0:
		return w.r.IntN(len(mem.attempts)), true
	}
	return 0, false
}

var (
	inDoubt = []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}
	open    = []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptRunning, jobs.AttemptUnknown}
)

// The steps.

// Submit submits a new intent, or one submitted before: the same again,
// written otherwise, or another under its key.
func (w *twin) Submit() {
	key := fmt.Sprintf("k%d", len(w.keys)+1)
	if len(w.keys) > 0 && w.r.IntN(2) == 0 {
		key = oneOf(w, w.keys...)
	} else {
		w.keys = append(w.keys, key)
	}
	params := oneOf(w, `{"amount":1200}`, `{ "amount" : 1200 }`, `{"amount":1300}`)
	w.compare("Submit", func(s *side) (any, error) {
		j, created, err := s.m.Submit(w.ctx, jobs.SubmitRequest{Owner: "o", Key: key, Kind: "charge", Provider: "acme", Params: json.RawMessage(params)})
		if created {
			s.jobs[key] = j.ID
		}
		return []any{j, created}, err
	})
}

func (w *twin) StartAttempt() {
	key := w.job()
	provider := oneOf(w, "", "", "", "backup", "other") // a failover, allowed once verified
	var opts []jobs.AttemptOption
	if w.r.IntN(2) == 0 {
		opts = append(opts, jobs.Hedge())
	}
	w.compare("StartAttempt", func(s *side) (any, error) {
		a, err := s.m.StartAttempt(w.ctx, s.jobs[key], provider, opts...)
		if err == nil {
			s.attempts = append(s.attempts, a.ID)
		}
		return a, err
	})
}

// Hedge does what a Runner does when an attempt's provider acknowledges
// the request and then stays silent: it records the acknowledgement of a
// starting attempt (or takes one that is running already), then starts a
// hedge past it.
func (w *twin) Hedge() {
	i, ok := w.attempt(jobs.AttemptStarting, jobs.AttemptRunning)
	if !ok {
		return
	}
	w.compare("MarkRunning before a hedge", func(s *side) (any, error) {
		return s.m.MarkRunning(w.ctx, s.attempts[i], "ref-1")
	})
	provider := oneOf(w, "", "backup")
	w.compare("Hedge", func(s *side) (any, error) {
		a, err := s.m.Attempt(w.ctx, s.attempts[i])
		if err != nil {
			return nil, err
		}
		h, err := s.m.StartAttempt(w.ctx, a.JobID, provider, jobs.Hedge())
		if err == nil {
			s.attempts = append(s.attempts, h.ID)
		}
		return h, err
	})
}

func (w *twin) MarkRunning() {
	if i, ok := w.attempt(inDoubt...); ok {
		ref := oneOf(w, "ref-1", "ref-2")
		w.compare("MarkRunning", func(s *side) (any, error) { return s.m.MarkRunning(w.ctx, s.attempts[i], ref) })
	}
}

func (w *twin) MarkUnknown() {
	if i, ok := w.attempt(jobs.AttemptStarting, jobs.AttemptRunning); ok {
		w.compare("MarkUnknown", func(s *side) (any, error) { return s.m.MarkUnknown(w.ctx, s.attempts[i], "no answer") })
	}
}

func (w *twin) Complete() {
	if i, ok := w.attempt(open...); ok {
		result := oneOf(w, `{"charged":1}`, `{"charged":2}`, `{"charged":3}`, `{"declined":true}`)
		w.compare("Complete", func(s *side) (any, error) { return s.m.Complete(w.ctx, s.attempts[i], json.RawMessage(result)) })
	}
}

func (w *twin) Fail() {
	if i, ok := w.attempt(open...); ok {
		w.compare("Fail", func(s *side) (any, error) { return s.m.Fail(w.ctx, s.attempts[i], "declined") })
	}
}

func (w *twin) Cancel() {
	if i, ok := w.attempt(open...); ok {
		w.compare("Cancel", func(s *side) (any, error) { return s.m.Cancel(w.ctx, s.attempts[i], "never sent") })
	}
}

func (w *twin) FailJob() {
	key := w.job()
	w.compare("FailJob", func(s *side) (any, error) { return s.m.FailJob(w.ctx, s.jobs[key], "gave up") })
}

func (w *twin) CancelJob() {
	key := w.job()
	w.compare("CancelJob", func(s *side) (any, error) { return s.m.CancelJob(w.ctx, s.jobs[key], "user left") })
}

func (w *twin) Advance() {
	w.clock.Advance(oneOf(w, time.Second, time.Minute, 2*time.Hour))
}

func (w *twin) VerifyProvider() {
	provider, kind := oneOf(w, "backup", "other"), oneOf(w, "charge", "refund")
	out := oneOf(w, `{"charged":0}`, `{}`)
	var opts []jobs.VerifyOption
	if w.r.IntN(2) == 0 {
		opts = append(opts, jobs.ValidFor(time.Hour))
	}
	roundTrip := func(context.Context) (json.RawMessage, error) { return json.RawMessage(out), nil }
	w.compare("VerifyProvider", func(s *side) (any, error) {
		return s.m.VerifyProvider(w.ctx, provider, kind, roundTrip, opts...)
	})
}

func (w *twin) Verifications() {
	f := jobs.VerificationFilter{Provider: oneOf(w, "", "backup", "other"), Kind: oneOf(w, "", "charge", "refund"),
		ContractVersion: oneOf(w, "", "v1", "v2"), Limit: oneOf(w, 0, 1, 2)}
	w.compare("Verifications", func(s *side) (any, error) { return s.store.Verifications(w.ctx, f) })
}

// purgeCutoff is the time before which closed jobs are purged.
func (w *twin) purgeCutoff() time.Time { return w.now().Add(-oneOf(w, 0, time.Second, time.Hour)) }

func (w *twin) Purge() {
	opts := jobs.PurgeOptions{OlderThan: w.purgeCutoff(), BatchSize: 1 + w.r.IntN(3), DryRun: w.r.IntN(4) == 0}
	w.compare("Purge", func(s *side) (any, error) {
		res, err := s.m.Purge(w.ctx, opts)
		res.Duration = 0 // wall time
		return res, err
	})
}

// PurgeJobs is one batch of a purge, which deletes the oldest jobs first.
func (w *twin) PurgeJobs() {
	q := jobs.PurgeQuery{Before: w.purgeCutoff(), Limit: 1 + w.r.IntN(2), DryRun: w.r.IntN(4) == 0}
	w.compare("PurgeJobs", func(s *side) (any, error) { return s.store.PurgeJobs(w.ctx, q) })
}

func (w *twin) StaleAttempts() {
	ago := func() time.Duration { return oneOf(w, 0, 10*time.Second, 5*time.Minute) }
	q := jobs.StaleQuery{UnknownBefore: w.now().Add(-ago()), OpenBefore: w.now().Add(-ago()), Limit: 1 + w.r.IntN(4)}
	if w.r.IntN(2) == 0 {
		q.UnclaimedAt = w.now()
	}
	w.compare("StaleAttempts", func(s *side) (any, error) { return s.store.StaleAttempts(w.ctx, q) })
}

var tokens = []string{"tok-a", "tok-b"}

// ClaimAttempt claims an attempt as a reconciler does: one that
// StaleAttempts could have listed, which is open, as it read it, or as it
// was before its last change.
func (w *twin) ClaimAttempt() {
	i, ok := w.attempt(open...)
	if !ok {
		return
	}
	if a, err := w.sides[0].store.Attempt(w.ctx, w.sides[0].attempts[i]); err != nil || !a.State.Open() {
		return // a reconciler claims only open attempts
	}
	token, outdated := oneOf(w, tokens...), w.r.IntN(4) == 0
	lease := oneOf(w, time.Second, time.Minute)
	w.compare("ClaimAttempt", func(s *side) (any, error) {
		a, err := s.store.Attempt(w.ctx, s.attempts[i])
		if err != nil {
			return nil, err
		}
		if outdated {
			a.UpdatedAt = a.UpdatedAt.Add(-time.Microsecond)
		}
		c, ok, err := s.store.ClaimAttempt(w.ctx, jobs.AttemptClaim{ID: a.ID, State: a.State, UpdatedAt: a.UpdatedAt,
			Token: token, At: w.now(), Until: w.now().Add(lease)})
		if ok && s == w.sides[0] {
			w.claims = append(w.claims, claim{i, token})
		}
		return []any{c, ok}, err
	})
}

func (w *twin) RenewClaim() {
	if i, ok := w.attempt(open...); ok {
		token, until := oneOf(w, tokens...), w.now().Add(oneOf(w, 0, time.Minute))
		w.compare("RenewClaim", func(s *side) (any, error) {
			return s.store.RenewClaim(w.ctx, jobs.AttemptClaim{ID: s.attempts[i], Token: token, Until: until})
		})
	}
}

// ReconcilerWrite is what a reconciler records with its claim's token:
// a result it looked up, or a failure or a cancellation. Three times in
// four it presents the token of the latest claim taken, which may have
// been taken over since.
func (w *twin) ReconcilerWrite() {
	c := claim{token: oneOf(w, tokens...)}
	var ok bool
	if len(w.claims) > 0 && w.r.IntN(4) > 0 {
		c = w.claims[len(w.claims)-1]
	} else if c.attempt, ok = w.attempt(open...); !ok {
		return
	}
	i, token := c.attempt, c.token
	to := oneOf(w, jobs.AttemptSucceeded, jobs.AttemptFailed, jobs.AttemptCancelled)
	w.compare("a reconciler's "+string(to), func(s *side) (any, error) {
		if to == jobs.AttemptSucceeded {
			j, a, err := s.store.CompleteAttempt(w.ctx, jobs.Completion{AttemptID: s.attempts[i],
				Result: json.RawMessage(`{"charged":3}`), At: w.now(), ClaimToken: token})
			return []any{j, a}, err
		}
		return s.store.UpdateAttempt(w.ctx, jobs.AttemptUpdate{ID: s.attempts[i], From: open, To: to,
			Reason: "provider says so", At: w.now(), ClaimToken: token})
	})
}

// check compares everything the two stores hold, and holds the memory
// store to the invariants.
func (w *twin) check() {
	var snap *invariant.Snapshot
	w.compare("the stored jobs and attempts", func(s *side) (any, error) {
		sn, err := invariant.TakeSnapshot(w.ctx, s.store)
		if err != nil {
			return nil, err
		}
		if s == w.sides[0] {
			snap = sn
		}
		var stored []any
		for _, j := range sn.Jobs {
			stored = append(stored, j, sn.Attempts[j.ID])
		}
		return stored, nil
	})
	w.compare("the stored verifications", func(s *side) (any, error) {
		return s.store.Verifications(w.ctx, jobs.VerificationFilter{Limit: 1000})
	})
	if snap == nil {
		return
	}
	for _, v := range snap.Check() {
		w.t.Errorf("memstore: invariant violated: %s", v)
	}
	if w.prev != nil {
		for _, v := range invariant.CheckTransitions(w.prev, snap) {
			w.t.Errorf("memstore: %s", v)
		}
	}
	w.prev = snap
}

// isSet reports whether the flag named name was given.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
