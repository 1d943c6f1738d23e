package reliability_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/internal/testdb"
	"github.com/intentjobs/jobs/jobstest"
)

// probeWrite is one write of the availability probe.
type probeWrite struct {
	start, end time.Time
	ok         bool
}

// probeWrites submits a new job every 20ms until stop is closed, and
// returns when each write started and ended and whether it succeeded.
func probeWrites(m *jobs.Manager, stop <-chan struct{}) <-chan []probeWrite {
	out := make(chan []probeWrite, 1)
	go func() {
		var ws []probeWrite
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- ws
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w := probeWrite{start: time.Now()}
			_, _, err := m.Submit(ctx, jobs.SubmitRequest{Owner: "probe", Key: fmt.Sprint("probe-", i), Kind: "probe", Provider: "p", Params: json.RawMessage(`{}`)})
			cancel()
			w.end, w.ok = time.Now(), err == nil
			ws = append(ws, w)
		}
	}()
	return out
}

// outage finds, among the probe's writes during a failover that started at
// start (and ended before until), the first run of failed writes and the
// successful write that ended it: writes failed from the first one's start
// to the last one's end, and succeeded again at recovered after start.
// failures counts all the failed writes in the window; it is 0, and so are
// the durations, when no write failed.
func outage(ws []probeWrite, start, until time.Time) (failed, recovered time.Duration, failures int) {
	var first *probeWrite
	var back time.Time
	for i := range ws {
		w := &ws[i]
		if w.end.Before(start) || !w.start.Before(until) {
			continue
		}
		switch {
		case !w.ok:
			failures++
			if first == nil {
				first = w
			}
		case first != nil && back.IsZero():
			back = w.end
		}
	}
	if first == nil {
		return 0, 0, 0
	}
	if back.IsZero() {
		back = until
	}
	from := first.start
	if from.Before(start) {
		from = start // a write begun before the failover, failed by it
	}
	return back.Sub(from), back.Sub(start), failures
}

// waitCheck is a waiter subscribed before a failover, for a job completed
// after it.
type waitCheck struct {
	job     jobs.Job
	attempt jobs.Attempt
	wake    <-chan struct{} // the store's NotifyClosed, as Wait uses it
	stop    func()
	waited  chan waitOutcome // Manager.Wait's answer
}

type waitOutcome struct {
	job jobs.Job
	err error
	at  time.Time
}

// waitFigures is what a waitCheck measured.
type waitFigures struct {
	listening      time.Duration // from the failover's start until the listening connection was on the new primary
	completed      time.Duration // Complete's duration
	notified       time.Duration // from Complete's call to the notification
	waited         time.Duration // from Complete's call to Wait's return
	byNotification bool          // the wake-up was the job's notification, not a reconnection
}

func armWaitCheck(t *testing.T, m *jobs.Manager, store *jobs.PostgresStore, name string) *waitCheck {
	t.Helper()
	ctx := t.Context()
	w := &waitCheck{waited: make(chan waitOutcome, 1)}
	if err := retryStorage(100, func() (err error) {
		w.job, _, err = m.Submit(ctx, jobs.SubmitRequest{Owner: "waiter", Key: name, Kind: "charge", Provider: "p", Params: json.RawMessage(`{}`)})
		return err
	}); err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	if err := retryStorage(100, func() (err error) {
		w.attempt, err = m.StartAttempt(ctx, w.job.ID, "")
		return err
	}); err != nil {
		t.Fatalf("start attempt for %s: %v", name, err)
	}
	var err error
	if w.wake, w.stop, err = store.NotifyClosed(ctx, w.job.ID); err != nil {
		t.Fatalf("NotifyClosed before the failover: %v", err)
	}
	t.Cleanup(w.stop)
	go func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		j, err := m.Wait(wctx, w.job.ID)
		w.waited <- waitOutcome{j, err, time.Now()}
	}()
	return w
}

// listenerOn returns the pid of the store's listening connection once it
// is on the primary listening on port, polling until it is. The store's
// pool reaches only the primary (target_session_attrs=read-write); the
// listening connection is the one whose last statement was LISTEN.
func listenerOn(ctx context.Context, db *sql.DB, app string, port int) (int, error) {
	for {
		var pid int
		err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN "intentjobs_closed.%'
			  AND inet_server_port() = $2 AND NOT pg_is_in_recovery()`, app, port).Scan(&pid)
		if err == nil {
			return pid, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no listening connection on the primary at port %d: %v (last error: %v)", port, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// fire completes the job after the failover, once the store listens on the
// new primary, and measures how the waiters learn of it.
func (w *waitCheck) fire(t *testing.T, m *jobs.Manager, store *jobs.PostgresStore, app string, port, pid int) waitFigures {
	t.Helper()
	var f waitFigures
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The reconnection wakes every waiter just after its LISTEN, which the
	// listener found: let that wake-up arrive, and drop it.
	time.Sleep(200 * time.Millisecond)
	for drained := false; !drained; {
		select {
		case <-w.wake:
		default:
			drained = true
		}
	}
	// The notification may arrive before Complete returns: the database
	// sends it as it commits, with Complete's answer.
	called := time.Now()
	if err := retryStorage(100, func() error {
		_, err := m.Complete(ctx, w.attempt.ID, resultOf(w.attempt.ID))
		return err
	}); err != nil {
		t.Errorf("complete after the failover: %v", err)
		return f
	}
	f.completed = time.Since(called)
	select {
	case <-w.wake:
		f.notified = time.Since(called)
	case <-ctx.Done():
		t.Errorf("no notification a minute after the job closed on the new primary")
		return f
	}
	again, err := listenerOn(ctx, store.DB(), app, port)
	f.byNotification = err == nil && again == pid
	select {
	case got := <-w.waited:
		f.waited = got.at.Sub(called)
		if got.err != nil || got.job.State != jobs.JobSucceeded || got.job.CompletedBy != w.attempt.ID {
			t.Errorf("Wait subscribed before the failover = %s by %s, %v; want succeeded by %s", got.job.State, got.job.CompletedBy, got.err, w.attempt.ID)
		}
	case <-ctx.Done():
		t.Errorf("Wait subscribed before the failover did not return a minute after the job closed")
	}
	w.stop()
	return f
}

// failoverRecord is one failover and its figures.
type failoverRecord struct {
	how              string
	from, to         string
	start            time.Time
	promoted, joined time.Duration // the new primary took writes; the old one was a standby again
	wait             waitFigures

	// async is when the monitor turned the old primary's synchronous
	// replication off (goal wait_primary) while the failover ran; zero if
	// it did not. See failoverRun.asynchronous.
	async time.Time
	why   string // the monitor's words for it
}

// unsentProvider answers every lookup with "no such request": in this test
// no request ever reaches a provider.
type unsentProvider struct{}

func (unsentProvider) Call(context.Context, jobs.Job, jobs.Attempt, func(string) error) (json.RawMessage, error) {
	return nil, failover.Definitive(errors.New("not called in this test"))
}

func (unsentProvider) Lookup(context.Context, jobs.Attempt) (failover.Outcome, error) {
	return failover.Outcome{State: failover.OutcomeNotFound}, nil
}

// failoverRun is one run of TestFailoverKeepsThePromise: the cluster, this
// process's store (whose listening connection is named app), and the
// failovers so far.
type failoverRun struct {
	c       *pgCluster
	m       *jobs.Manager
	store   *jobs.PostgresStore
	app     string
	load    *failoverLoad // nil: no load to throttle while a node rejoins
	records []*failoverRecord
}

// rejoinAtFullLoad is how long the old primary is given to come back as
// the standby under the children's full load. On two shared cores a
// standby replaying the WAL of 200 callers can fall behind as fast as it
// catches up; after this, the load is throttled until the node has
// rejoined (and logged): the failover itself always happens at full load.
const rejoinAtFullLoad = 30 * time.Second

// failover fails the primary over, how being "perform failover" or
// "primary killed", waits until the old primary is the standby again, and
// checks that a waiter subscribed before hears of a job completed after.
func (run *failoverRun) failover(t *testing.T, how string) {
	t.Helper()
	w := armWaitCheck(t, run.m, run.store, fmt.Sprintf("waiter-%d", len(run.records)))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns, err := run.c.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old, ok := primaryOf(ns)
	if !ok {
		t.Fatalf("no primary before the failover: %v", ns)
	}
	next := ns[0]
	if next.Name == old.Name {
		next = ns[1]
	}
	r := &failoverRecord{how: how, from: old.Name, to: next.Name, start: time.Now()}
	run.records = append(run.records, r)

	type found struct {
		pid int
		at  time.Duration
		err error
	}
	listening := make(chan found, 1)
	go func() {
		pid, err := listenerOn(ctx, run.store.DB(), run.app, next.Port)
		listening <- found{pid, time.Since(r.start), err}
	}()
	promoted := func(ns []pgNode) bool { p, ok := primaryOf(ns); return ok && p.Name == next.Name }
	switch how {
	case "perform failover":
		performed := make(chan error, 1)
		go func() { performed <- run.c.performFailover(ctx) }()
		_, err := run.c.waitFor(ctx, "a new primary", promoted)
		r.promoted = time.Since(r.start)
		if err != nil {
			t.Fatal(errors.Join(err, <-performed))
		}
		// pg_autoctl, once it has asked for the failover, follows it through
		// the monitor's notifications, and can lose them and give up (exit
		// status 12, "Failed to receive monitor's notifications") after the
		// monitor has promoted the standby: the monitor's state, read above,
		// says what happened.
		if err := <-performed; err != nil {
			t.Logf("the standby was promoted, but %v", err)
		}
	case "primary killed":
		resume, err := run.c.crash(old)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(resume)
		_, err = run.c.waitFor(ctx, "a new primary", promoted)
		r.promoted = time.Since(r.start)
		resume()
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no failover called %q", how)
	}
	if err := run.waitForRejoin(t, ctx); err != nil {
		t.Fatal(err)
	}
	r.joined = time.Since(r.start)
	l := <-listening
	if l.err != nil {
		t.Fatalf("after the failover: %v; a LISTEN on a standby never fires", l.err)
	}
	r.wait = w.fire(t, run.m, run.store, run.app, next.Port, l.pid)
	r.wait.listening = l.at
}

// waitForRejoin waits until the old primary is the standby again: for
// rejoinAtFullLoad under the full load, then with the load throttled.
func (run *failoverRun) waitForRejoin(t *testing.T, ctx context.Context) error {
	const what = "the old primary back as the standby"
	if run.load == nil {
		_, err := run.c.waitFor(ctx, what, healthy)
		return err
	}
	full, cancel := context.WithTimeout(ctx, rejoinAtFullLoad)
	_, err := run.c.waitFor(full, what, healthy)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	t.Logf("the old primary has not rejoined after %v at full load: throttling the load until it has", rejoinAtFullLoad)
	run.load.throttle(t, true)
	defer run.load.throttle(t, false)
	_, err = run.c.waitFor(ctx, what, healthy)
	return err
}

// asynchronous finds the failovers during which the monitor assigned the
// old primary wait_primary, which turns its synchronous replication off,
// while the standby was being promoted. pg_auto_failover 2.0 does so when
// the old primary reports to the monitor as `perform failover` runs: it
// sees no healthy standby (the standby is now being promoted), and the old
// primary keeps acknowledging writes, replicated asynchronously, until it
// is demoted (pg_auto_failover#774). Writes acknowledged in that
// window may be lost: the asynchronous case of the table in docs/operations.md.
func (run *failoverRun) asynchronous(t *testing.T) {
	t.Helper()
	for _, r := range run.records {
		err := run.c.monitor.QueryRowContext(context.Background(), `SELECT eventtime, description FROM pgautofailover.event
			WHERE nodename = $1 AND reportedstate = 'primary' AND goalstate = 'wait_primary'
			  AND eventtime BETWEEN $2 AND $3
			ORDER BY eventid LIMIT 1`, r.from, r.start.Add(-time.Second), r.start.Add(r.joined)).Scan(&r.async, &r.why)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("monitor events: %v", err)
		}
	}
}

// explains reports whether the time from at to until (or at alone, if
// until is zero) meets the asynchronous window of a failover: from a
// second before the monitor turned synchronous replication off until three
// seconds after the new primary took over (the old one is stopped by then).
func (run *failoverRun) explains(at, until time.Time) bool {
	if until.IsZero() {
		until = at
	}
	for _, r := range run.records {
		if !r.async.IsZero() && !until.Before(r.async.Add(-time.Second)) && at.Before(r.start.Add(r.promoted+3*time.Second)) {
			return true
		}
	}
	return false
}

// breach is a broken promise found after the run: an answer a caller was
// given at a time that the store now contradicts, or two snapshots, taken
// from at to until, of which the second contradicts the first.
type breach struct {
	kind      string // "acknowledged submits lost", …
	at, until time.Time
	detail    string
}

// judge reports the breaches that no asynchronous window explains as test
// failures, and counts both kinds by kind.
func (run *failoverRun) judge(t *testing.T, bs []breach) (unexplained, explained map[string]int) {
	t.Helper()
	unexplained, explained = map[string]int{}, map[string]int{}
	for _, b := range bs {
		if !b.at.IsZero() && run.explains(b.at, b.until) {
			explained[b.kind]++
			continue
		}
		unexplained[b.kind]++
		if unexplained[b.kind] <= 10 {
			t.Errorf("%s: %s", b.kind, b.detail)
		}
	}
	return unexplained, explained
}

// answer is one thing a caller was told.
type answer struct {
	key, job, attempt string
	at                time.Time
}

// failoverTally is what the children's callers were told.
type failoverTally struct {
	submitted, won, lost, waited []answer
	unexpected                   []failoverEvent

	storageErrors map[string]map[string]int // error class -> operation -> count
	samples       map[string]string         // error class -> one message

	retriedSubmits, retriedCompletes int
}

func tallyFailover(t *testing.T, evs []failoverEvent) *failoverTally {
	t.Helper()
	tl := &failoverTally{storageErrors: map[string]map[string]int{}, samples: map[string]string{}}
	for _, e := range evs {
		a := answer{key: e.Key, job: e.JobID, attempt: e.AttemptID, at: time.Unix(0, e.At)}
		switch e.Type {
		case "submitted":
			tl.submitted = append(tl.submitted, a)
			if e.Retries > 0 {
				tl.retriedSubmits++
			}
		case "won":
			tl.won = append(tl.won, a)
			if e.Retries > 0 {
				tl.retriedCompletes++
			}
		case "lost":
			tl.lost = append(tl.lost, a)
			if e.Retries > 0 {
				tl.retriedCompletes++
			}
		case "waited":
			tl.waited = append(tl.waited, a)
		case "storage-error":
			if tl.storageErrors[e.Class] == nil {
				tl.storageErrors[e.Class] = map[string]int{}
				tl.samples[e.Class] = e.Err
			}
			tl.storageErrors[e.Class][e.Op]++
			if strings.HasPrefix(e.Class, "ErrStorage/NO KIND") || strings.HasPrefix(e.Class, "ErrStorage/other") {
				t.Errorf("%s: a storage error callers cannot classify: %s", e.Op, e.Err)
			}
		case "unexpected":
			tl.unexpected = append(tl.unexpected, e)
		}
	}
	return tl
}

// breaches compares every answer the callers were given with what the
// store holds.
func (tl *failoverTally) breaches(t *testing.T, store testdb.Store) []breach {
	t.Helper()
	ctx := context.Background()
	var bs []breach
	jobOfKey := map[string]string{}
	for _, a := range tl.submitted {
		id, ok := jobOfKey[a.key]
		if !ok {
			j, err := store.JobByKey(ctx, "tenant", a.key)
			if err != nil && !errors.Is(err, jobs.ErrNotFound) {
				t.Fatal(err)
			}
			id, jobOfKey[a.key] = j.ID, j.ID
		}
		if id != a.job {
			bs = append(bs, breach{"acknowledged submits lost", a.at, time.Time{}, fmt.Sprintf("key %s: a caller was told job %s; the store has %q", a.key, a.job, id)})
		}
	}
	known := map[string]jobs.Job{}
	job := func(id string) jobs.Job {
		j, ok := known[id]
		if !ok {
			var err error
			if j, err = store.Job(ctx, id); err != nil && !errors.Is(err, jobs.ErrNotFound) {
				t.Fatal(err)
			}
			known[id] = j
		}
		return j
	}
	winners := map[string]answer{}
	for _, a := range tl.won {
		if other, ok := winners[a.job]; ok && other.attempt != a.attempt {
			first := other.at
			if a.at.Before(first) {
				first = a.at
			}
			bs = append(bs, breach{"double completions", first, time.Time{}, fmt.Sprintf("job %s: completed by %s and by %s", a.job, other.attempt, a.attempt)})
		}
		winners[a.job] = a
		if j := job(a.job); j.CompletedBy != a.attempt || string(j.Result) != string(resultOf(a.attempt)) {
			bs = append(bs, breach{"acknowledged completions lost", a.at, time.Time{}, fmt.Sprintf("job %s: %s was told it won; the store has %q with %s", a.job, a.attempt, j.CompletedBy, j.Result)})
		}
	}
	for _, a := range tl.lost {
		if j := job(a.job); j.CompletedBy == a.attempt || string(j.Result) == string(resultOf(a.attempt)) {
			bs = append(bs, breach{"late results stored", a.at, time.Time{}, fmt.Sprintf("job %s: %s was told it lost, but its result is stored", a.job, a.attempt)})
		}
	}
	for _, a := range tl.waited {
		if j := job(a.job); j.CompletedBy != a.attempt {
			bs = append(bs, breach{"Wait answers the store contradicts", a.at, time.Time{}, fmt.Sprintf("job %s: Wait answered completed by %q; the store has %q", a.job, a.attempt, j.CompletedBy)})
		}
	}
	for _, e := range tl.unexpected {
		// Only a job or attempt that vanished is a breach a window can
		// explain; any other unexpected answer is one at any time.
		var at time.Time
		if e.Class == "ErrNotFound" && e.AckedAt != 0 {
			at = time.Unix(0, e.AckedAt)
		}
		bs = append(bs, breach{"unexpected errors", at, time.Time{}, fmt.Sprintf("%s: a caller got %s: %s", e.Op, e.Class, e.Err)})
	}
	return bs
}

// watchFailoverTransitions is watchTransitions for a store that may answer
// from a primary about to lose what it acknowledged: its violations are
// breaches, with the times the two snapshots spanned, for run.judge.
func watchFailoverTransitions(s testdb.Store, interval time.Duration) (stop func() (snapshots int, bs []breach)) {
	watch := watchSnapshots(s, interval)
	return func() (int, []breach) {
		snapshots, vs, err := watch()
		var bs []breach
		for _, v := range vs {
			bs = append(bs, breach{"transitions", v.from, v.to, v.String()})
		}
		if err != nil {
			bs = append(bs, breach{"transitions", time.Time{}, time.Time{}, "snapshot: " + err.Error()})
		}
		return snapshots, bs
	}
}

// reconcileLeftovers runs a reconciler an hour ahead of time until it finds
// nothing more to examine, and returns the states it resolved attempts
// from. Attempts whose StartAttempt answer was lost stay starting: its part.
func reconcileLeftovers(t *testing.T, store testdb.Store) map[jobs.AttemptState]int {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	later, err := jobs.New(store, jobs.Options{Logger: quiet, Clock: jobstest.NewClock(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	rec := &failover.Reconciler{Manager: later, Providers: map[string]failover.Provider{"p": unsentProvider{}}, Logger: quiet}
	resolved := map[jobs.AttemptState]int{}
	for range 20 {
		rep, err := rec.ReconcileOnce(context.Background())
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		for _, r := range rep.Resolved {
			resolved[r.From]++
		}
		if rep.Examined == 0 {
			break
		}
	}
	return resolved
}

// TestFailoverKeepsThePromise runs 4 processes x 50 goroutines against a
// pg_auto_failover cluster with synchronous replication (submits on
// overlapping keys, hedged attempts racing to complete, waits), while the
// primary is failed over on request (pg_autoctl perform failover) and then
// killed outright (SIGKILL of its postmaster; pg_autoctl brings it back as
// the standby). Every caller retries on ErrStorage with the same key or
// attempt. Afterwards no acknowledged Submit or completion is lost, no job
// is completed twice, no late result is stored, no key has two jobs, every
// error a caller saw was a typed ErrStorage, and a waiter subscribed before
// each failover was woken by the notification of a job completed after it.
//
// What the cluster itself loses while pg_auto_failover has turned
// synchronous replication off (see failoverRun.asynchronous) is reported,
// and is a failure only if it falls outside that window. JOBS_SOAK=N
// repeats the pair of failovers N times.
//
// It does not run in parallel with the other tests: its figures (how long
// writes fail) are measured on a machine they do not load.
func TestFailoverKeepsThePromise(t *testing.T) {
	c := failoverCluster(t)
	began := time.Now()
	ctx := t.Context()

	admin, err := sql.Open("pgx", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	schema := fmt.Sprintf("jobs_failover_%d", rand.Uint64()%1e12)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The cluster may still be settling after a failed run.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for {
			_, err := admin.ExecContext(dctx, `DROP SCHEMA `+schema+` CASCADE`)
			if err == nil {
				return
			}
			if dctx.Err() != nil {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The children's connections and this process's have different names,
	// so that this store's listening connection can be told apart.
	dsn := withParam(t, withParam(t, c.dsn, "search_path", schema), "application_name", schema+"_children")
	run := &failoverRun{c: c, app: schema + "_parent"}
	if run.store, err = jobs.OpenPostgres(ctx, withParam(t, dsn, "application_name", run.app)); err != nil {
		t.Fatal(err)
	}
	run.store.DB().SetMaxOpenConns(6)
	t.Cleanup(func() { run.store.Close() })
	// Its history is not recorded for the linearizability check
	// (JOBS_HISTORY_DIR): its keys see more calls at once (200 callers on
	// 25 keys a second, hedged, waiting, and stalled together by each
	// failover) than the checker decides within its minute a key. The
	// callers' ledger, the snapshots and the invariants check it instead.
	run.m = jobstest.NewManager(t, run.store, jobs.Options{Logger: slog.New(slog.DiscardHandler)})

	const processes, goroutines = 4, 50
	load := startFailoverLoad(t, dsn, processes, childArgs{Goroutines: goroutines, Keys: 25, Seed: seed(t)})
	run.load = load
	stopProbe := make(chan struct{})
	probed := probeWrites(run.m, stopProbe)
	stopWatch := watchFailoverTransitions(run.store, time.Second)
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	pause(3 * time.Second) // load before the first failover
	for range soak() {
		run.failover(t, "perform failover")
		pause(2 * time.Second)
		run.failover(t, "primary killed")
		pause(2 * time.Second)
	}
	evs := load.stop(t)
	close(stopProbe)
	writes := <-probed
	snapshots, transitions := stopWatch()
	ran := time.Since(began)

	tl := tallyFailover(t, evs)
	resolved := reconcileLeftovers(t, run.store)
	run.asynchronous(t)
	unexplained, explained := run.judge(t, append(tl.breaches(t, run.store), transitions...))
	snap := assertInvariants(t, run.store)
	open, duplicates := 0, 0
	jobsOfKey := map[string]int{}
	for _, j := range snap.Jobs {
		if jobsOfKey[j.Owner+"/"+j.Key]++; jobsOfKey[j.Owner+"/"+j.Key] == 2 {
			duplicates++ // also an invariant violation, reported above
		}
		for _, a := range snap.Attempts[j.ID] {
			if a.State.Open() {
				open++
			}
		}
	}
	if open > 0 {
		t.Errorf("%d attempts still open after the reconciler's passes", open)
	}

	keys := map[string]bool{}
	for _, a := range tl.submitted {
		keys[a.key] = true
	}
	t.Logf("%d failovers in %v under %d processes x %d goroutines: %d submits (%d answered after retrying ErrStorage) on %d keys, %d wins and %d lost races (%d answered after a retry), %d waits answered, %d snapshots compared with the one before",
		len(run.records), ran.Round(time.Second), processes, goroutines, len(tl.submitted), tl.retriedSubmits, len(keys),
		len(tl.won), len(tl.lost), tl.retriedCompletes, len(tl.waited), snapshots)
	var figures []string
	for _, kind := range []string{"acknowledged submits lost", "acknowledged completions lost", "double completions",
		"late results stored", "Wait answers the store contradicts", "transitions", "unexpected errors"} {
		f := fmt.Sprintf("%s: %d", kind, unexplained[kind])
		if n := explained[kind]; n > 0 {
			f += fmt.Sprintf(" (and %d while replication was asynchronous)", n)
		}
		figures = append(figures, f)
	}
	t.Logf("%s; duplicate jobs per key: %d", strings.Join(figures, "; "), duplicates)
	t.Logf("attempts left in doubt (StartAttempt's answer lost), resolved by a reconciler: %v", resolved)
	for _, class := range slices.Sorted(maps.Keys(tl.storageErrors)) {
		var ops []string
		total := 0
		for _, op := range slices.Sorted(maps.Keys(tl.storageErrors[class])) {
			n := tl.storageErrors[class][op]
			ops = append(ops, fmt.Sprintf("%s %d", op, n))
			total += n
		}
		t.Logf("callers' errors: %d x %s (%s), all retried; e.g. %q", total, class, strings.Join(ops, ", "), tl.samples[class])
	}
	for i, r := range run.records {
		until := time.Now()
		if i+1 < len(run.records) {
			until = run.records[i+1].start
		}
		failed, recovered, failures := outage(writes, r.start, until)
		t.Logf("failover %d (%s, %s -> %s): new primary after %v; writes failed for %v and succeeded again %v after the start (%d probe writes failed); old primary a standby again after %v",
			i+1, r.how, r.from, r.to, r.promoted.Round(time.Millisecond), failed.Round(time.Millisecond), recovered.Round(time.Millisecond),
			failures, r.joined.Round(time.Millisecond))
		if !r.async.IsZero() {
			t.Logf("failover %d: %v after the start pg_auto_failover turned the old primary's synchronous replication off while it promoted the standby (pg_auto_failover#774): %q",
				i+1, r.async.Sub(r.start).Round(time.Millisecond), r.why)
		}
		how := "a reconnection or a poll"
		if r.wait.byNotification {
			how = "its notification"
		}
		t.Logf("failover %d: listening on the new primary %v after the start; a job completed then (Complete took %v) woke the waiter subscribed before the failover by %s %v after the call, and its Wait returned after %v",
			i+1, r.wait.listening.Round(time.Millisecond), r.wait.completed.Round(10*time.Microsecond), how,
			r.wait.notified.Round(10*time.Microsecond), r.wait.waited.Round(10*time.Microsecond))
		if !r.wait.byNotification {
			t.Errorf("failover %d: the waiter was not woken by the job's notification", i+1)
		}
	}
}
