// Command failover shows safe failover between providers that share a
// contract, with three simulated AI models behind one "summarize" job kind:
//
//   - fast-model answers correctly in 20 ms;
//   - slow-model answers correctly, but only after 600 ms;
//   - sloppy-model answers at once, with JSON that ignores the format.
//
// It plays four scenes: verification of the fallbacks, a hedge that wins a
// race against the slow primary, a contract violation that fails over, and
// a timeout left unknown until the reconciler learns the truth.
//
// It runs on an embedded SQLite file in a temporary directory:
//
//	go run ./examples/failover
//	go run ./examples/failover -postgres "$DSN"   # or on PostgreSQL
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

func main() {
	pgDSN := flag.String("postgres", "", "PostgreSQL DSN to use instead of SQLite")
	flag.Parse()
	if err := run(os.Stdout, *pgDSN); err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

const kind = "summarize"

// summaryContract is what the business logic can use: an object with one
// non-empty "summary" string and nothing else.
var summaryContract = jobs.Contract{Version: "v1", Validate: func(raw json.RawMessage) error {
	var v struct {
		Summary *string `json:"summary"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not a summary: %v", err)
	}
	if v.Summary == nil || strings.TrimSpace(*v.Summary) == "" {
		return errors.New("summary missing or empty")
	}
	return nil
}}

func run(w io.Writer, pgDSN string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var store jobs.SQLStore
	var err error
	if pgDSN != "" {
		store, err = jobs.OpenPostgres(ctx, pgDSN)
		fmt.Fprintln(w, "Store: PostgreSQL")
	} else {
		dir, derr := os.MkdirTemp("", "jobs-failover-")
		if derr != nil {
			return derr
		}
		defer os.RemoveAll(dir)
		store, err = jobs.OpenSQLite(ctx, filepath.Join(dir, "jobs.db"))
		fmt.Fprintln(w, "Store: SQLite, in a temporary directory")
	}
	if err != nil {
		return err
	}
	defer store.Close()

	m, err := jobs.New(store, jobs.Options{
		Logger:    slog.New(slog.DiscardHandler), // the demo tells the story itself
		Contracts: map[string]jobs.Contract{kind: summaryContract},
	})
	if err != nil {
		return err
	}
	d := &demo{
		w:     w,
		m:     m,
		owner: fmt.Sprintf("reader-%d", time.Now().UnixNano()), // fresh per run, so PostgreSQL runs repeat cleanly
		fast:  newSimModel("fast-model", 20*time.Millisecond, `{"summary":"Rates rise; markets shrug."}`),
		slow:  newSimModel("slow-model", 600*time.Millisecond, `{"summary":"Rates rose and markets did not react."}`),
		sloppy: newSimModel("sloppy-model", 0,
			`{"text":"Sure! Here is a summary of the article you sent me."}`),
	}
	d.providers = map[string]failover.Provider{"fast-model": d.fast, "slow-model": d.slow, "sloppy-model": d.sloppy}
	for _, scene := range []func(context.Context) error{d.verify, d.hedge, d.violation, d.reconcile} {
		if err := scene(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nDone: every job has one result, from a provider whose output passed the contract.")
	return nil
}

type demo struct {
	w                  io.Writer
	m                  *jobs.Manager
	owner              string
	fast, slow, sloppy *simModel
	providers          map[string]failover.Provider
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.w, format+"\n", args...) }

// runner returns a runner for jobs targeting primary, falling back on the
// other models in a fixed order.
func (d *demo) runner() *failover.Runner {
	return &failover.Runner{
		Manager:        d.m,
		Providers:      d.providers,
		Fallbacks:      []string{"fast-model", "sloppy-model"},
		HedgeAfter:     100 * time.Millisecond,
		AttemptTimeout: 2 * time.Second,
	}
}

func (d *demo) submit(ctx context.Context, key, provider string) (jobs.Job, error) {
	j, _, err := d.m.Submit(ctx, jobs.SubmitRequest{
		Owner: d.owner, Key: key, Kind: kind, Provider: provider,
		Params: json.RawMessage(`{"url":"https://example.com/rates"}`),
	})
	return j, err
}

// report prints a job's attempts in plain words.
func (d *demo) report(ctx context.Context, j jobs.Job) error {
	as, err := d.m.Attempts(ctx, j.ID)
	if err != nil {
		return err
	}
	for _, a := range as {
		line := fmt.Sprintf("   attempt %d on %s", a.Seq, a.Provider)
		if a.Hedge {
			line += " (hedge)"
		}
		line += ": " + string(a.State)
		switch a.State {
		case jobs.AttemptFailed:
			line += " — " + a.Reason
		case jobs.AttemptLost:
			line += " — its result arrived second and was dropped"
		case jobs.AttemptSucceeded:
			line += " — its result is the job's"
		}
		d.say("%s", line)
	}
	if j.State == jobs.JobSucceeded {
		d.say("   job result: %s", j.Result)
	}
	return nil
}

func (d *demo) verify(ctx context.Context) error {
	d.say("\n1. Verification: a fallback must prove it speaks the contract before it is used.")
	for _, p := range []*simModel{d.fast, d.sloppy} {
		v, err := d.m.VerifyProvider(ctx, p.name, kind, func(ctx context.Context) (json.RawMessage, error) {
			return p.roundTrip(ctx)
		}, jobs.ValidFor(24*time.Hour))
		if err != nil {
			return err
		}
		if v.Passed {
			d.say("   %s: passed contract %s; eligible for failover until tomorrow", p.name, v.ContractVersion)
		} else {
			d.say("   %s: failed — %s", p.name, v.Reason)
		}
	}
	list, err := d.m.Verifications(ctx, jobs.VerificationFilter{Kind: kind})
	if err != nil {
		return err
	}
	d.say("   %d verifications recorded in the store", len(list))
	return nil
}

func (d *demo) hedge(ctx context.Context) error {
	d.say("\n2. Hedging: slow-model acknowledges but stays silent, so after 100 ms the runner")
	d.say("   hedges on fast-model. fast-model departs second and finishes first: it wins.")
	j, err := d.submit(ctx, "article-1", "slow-model")
	if err != nil {
		return err
	}
	start := time.Now()
	j, err = d.runner().Run(ctx, j.ID)
	if err != nil {
		return err
	}
	if time.Since(start) < d.slow.delay {
		return errors.New("the runner returned before the slow model's late result")
	}
	return d.report(ctx, j)
}

func (d *demo) violation(ctx context.Context) error {
	d.say("\n3. A contract violation: sloppy-model answers at once, \"successfully\", with the wrong JSON.")
	d.say("   The result never reaches the job; the runner fails over to a verified model.")
	j, err := d.submit(ctx, "article-2", "sloppy-model")
	if err != nil {
		return err
	}
	if j, err = d.runner().Run(ctx, j.ID); err != nil {
		return err
	}
	if err := d.report(ctx, j); err != nil {
		return err
	}

	d.say("   And the other way round: failing over to sloppy-model is refused.")
	j, err = d.submit(ctx, "article-3", "fast-model")
	if err != nil {
		return err
	}
	_, err = d.m.StartAttempt(ctx, j.ID, "sloppy-model")
	var pe *jobs.ProviderUnverifiedError
	if !errors.As(err, &pe) {
		return fmt.Errorf("failover to an unverified model: got %v", err)
	}
	d.say("   StartAttempt(sloppy-model): refused, %s", pe.Reason)
	_, err = d.m.CancelJob(ctx, j.ID, "demo")
	return err
}

func (d *demo) reconcile(ctx context.Context) error {
	d.say("\n4. A timeout: slow-model gets only 50 ms. The attempt becomes unknown, not failed,")
	d.say("   and nothing else starts until the reconciler asks slow-model what happened.")
	j, err := d.submit(ctx, "article-4", "slow-model")
	if err != nil {
		return err
	}
	r := d.runner()
	r.AttemptTimeout = 50 * time.Millisecond
	r.HedgeAfter = 0
	_, err = r.Run(ctx, j.ID)
	var inFlight *jobs.AttemptInFlightError
	if !errors.As(err, &inFlight) {
		return fmt.Errorf("timeout: got %v", err)
	}
	d.say("   Run: the attempt is %s; the job is in doubt", inFlight.State)
	if _, err := r.Run(ctx, j.ID); errors.Is(err, jobs.ErrAttemptInFlight) {
		d.say("   Run again: refused, no second request is sent")
	} else {
		return fmt.Errorf("second run: got %v", err)
	}

	rec := &failover.Reconciler{Manager: d.m, Providers: d.providers, StaleAfter: time.Minute, RecheckAfter: time.Millisecond}
	for {
		rep, err := rec.ReconcileOnce(ctx)
		if err != nil {
			return err
		}
		if len(rep.Errors) > 0 {
			return rep.Errors[0]
		}
		if len(rep.Resolved) > 0 {
			res := rep.Resolved[0]
			d.say("   Reconciler: %s said the request finished; attempt %s -> %s", res.Provider, res.From, res.To)
			break
		}
		select { // still working: ask again shortly
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if j, err = d.m.Get(ctx, j.ID); err != nil {
		return err
	}
	return d.report(ctx, j)
}

// simModel is a simulated model API. Like a real one, it keeps working on a
// request after the client hangs up, honours the idempotency key each
// request carries (a resent request joins the work already under way), and
// can be asked about a request later by its reference or by its key.
type simModel struct {
	name   string
	delay  time.Duration
	answer json.RawMessage

	mu     sync.Mutex
	n      int                    // requests accepted
	checks int                    // verification round trips
	byKey  map[string]*simRequest // idempotency key -> request
	byRef  map[string]*simRequest // reference -> request
	fenced map[string]bool        // keys answered "not found": refused from then on
}

type simRequest struct {
	ref   string
	ready time.Time // when the answer is ready
}

func newSimModel(name string, delay time.Duration, answer string) *simModel {
	return &simModel{name: name, delay: delay, answer: json.RawMessage(answer),
		byKey: map[string]*simRequest{}, byRef: map[string]*simRequest{}, fenced: map[string]bool{}}
}

// accept takes the request with the given idempotency key and returns its
// reference: the same one again for a key it already has.
func (p *simModel) accept(key string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced[key] {
		return "", fmt.Errorf("%s: request %s was declared never received", p.name, key)
	}
	if r, ok := p.byKey[key]; ok {
		return r.ref, nil
	}
	p.n++
	r := &simRequest{ref: fmt.Sprintf("%s-req-%d", p.name, p.n), ready: time.Now().Add(p.delay)}
	p.byKey[key], p.byRef[r.ref] = r, r
	return r.ref, nil
}

func (p *simModel) wait(ctx context.Context) (json.RawMessage, error) {
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return p.answer, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Call implements failover.Provider. The attempt's ProviderKey travels with the
// request as its idempotency key.
func (p *simModel) Call(ctx context.Context, _ jobs.Job, a jobs.Attempt, ack func(string) error) (json.RawMessage, error) {
	ref, err := p.accept(a.ProviderKey())
	if err != nil {
		return nil, failover.Definitive(err)
	}
	ack(ref)
	return p.wait(ctx)
}

// Lookup implements failover.Provider: by reference when the attempt has one,
// else by its idempotency key. A key it has never seen is fenced before it
// answers "not found", so that the answer stays true: a late request with
// that key is refused.
func (p *simModel) Lookup(_ context.Context, a jobs.Attempt) (failover.Outcome, error) {
	p.mu.Lock()
	r, ok := p.byRef[a.ProviderRef]
	if a.ProviderRef == "" {
		r, ok = p.byKey[a.ProviderKey()]
		if !ok {
			p.fenced[a.ProviderKey()] = true
		}
	}
	p.mu.Unlock()
	switch {
	case !ok:
		return failover.Outcome{State: failover.OutcomeNotFound}, nil
	case time.Now().Before(r.ready):
		return failover.Outcome{State: failover.OutcomePending}, nil
	}
	return failover.Outcome{State: failover.OutcomeSucceeded, Result: p.answer}, nil
}

// roundTrip is a verification request with real inputs, under a key of its own.
func (p *simModel) roundTrip(ctx context.Context) (json.RawMessage, error) {
	p.mu.Lock()
	p.checks++
	key := fmt.Sprintf("verify-%d", p.checks)
	p.mu.Unlock()
	if _, err := p.accept(key); err != nil {
		return nil, err
	}
	return p.wait(ctx)
}
