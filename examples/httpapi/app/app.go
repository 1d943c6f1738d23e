// Package app is the example HTTP API's server: a page with a print form,
// the jobshttp handler behind it, and a worker that runs the jobs slowly
// enough for a second click to land while the first request is in flight.
// It is a package of its own so that the browser test can start it.
package app

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/jobshttp"
)

//go:embed page.html
var pageFS embed.FS

var page = template.Must(template.ParseFS(pageFS, "page.html"))

// OwnerCookie holds the browser's owner ID, set when the page is served.
const OwnerCookie = "owner"

// Options configures the App.
type Options struct {
	// WorkDelay is how long the worker takes for a job: half before the
	// provider "acknowledges" it (running), half before it completes.
	// Defaults to 3s.
	WorkDelay time.Duration
	// Workers is the number of jobs worked on at once. Defaults to 4.
	Workers int
	// QueueSize is how many jobs wait in memory for a worker. Defaults to
	// 1024. Jobs beyond it are not lost: they wait in the store, pending,
	// and a sweep hands them to the workers as room frees up.
	QueueSize int
	// SweepInterval is how often the store is swept for pending jobs that
	// no queue holds, such as jobs another process created. Defaults to
	// 30s. A full queue asks for a sweep at once, and Run sweeps when it
	// starts.
	SweepInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// LostAcks is the share of prints, 0 to 1, whose acknowledgement the
	// worker never gets, as if the network dropped it: their attempts
	// become unknown while the printer prints on, for a Reconciler to
	// resolve (or an operator, in the console). Defaults to 0.
	LostAcks float64
	// Console, if not nil, is served at /console/ (see ConsoleAccess).
	Console http.Handler
}

// App serves the page and the API and works on the jobs.
type App struct {
	m      *jobs.Manager
	opts   Options
	api    *jobshttp.Handler
	queue  *workQueue
	sweep  chan struct{} // asks the sweeper for a sweep; holds one request at most
	logger *slog.Logger
	spool  *spool
}

// New returns an App over m. Call Run to start its workers.
func New(m *jobs.Manager, opts Options) *App {
	if opts.WorkDelay <= 0 {
		opts.WorkDelay = 3 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &App{m: m, opts: opts, queue: newWorkQueue(opts.QueueSize),
		sweep: make(chan struct{}, 1), logger: opts.Logger, spool: newSpool()}
	a.api = jobshttp.New(m, jobshttp.Options{
		Owner:   Owner,
		MaxWait: 30 * time.Second,
		Logger:  opts.Logger,
		Check: func(r *http.Request, req jobs.SubmitRequest) error {
			if req.Kind != "print" {
				return fmt.Errorf("kind %q: this service only prints", req.Kind)
			}
			if req.Provider != "laser" && req.Provider != "inkjet" {
				return fmt.Errorf("provider %q: choose laser or inkjet", req.Provider)
			}
			return nil
		},
		Created: func(ctx context.Context, j jobs.Job) { a.enqueue(j.ID) },
	})
	return a
}

// Owner authenticates a request for the demo: "Authorization: Bearer NAME"
// (for curl) makes NAME the owner, else the owner cookie the page set.
// A real service would use its own sessions or tokens here.
func Owner(r *http.Request) (string, bool) {
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		tok = strings.TrimSpace(tok)
		return tok, tok != ""
	}
	if c, err := r.Cookie(OwnerCookie); err == nil && c.Value != "" {
		return c.Value, true
	}
	return "", false
}

// Handler serves the page at / and the API at /jobs, and the console at
// /console/ with the demo's sign-in at /sign-in when Options.Console is
// set.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	a.api.Register(mux)
	mux.HandleFunc("GET /{$}", a.servePage)
	if a.opts.Console != nil {
		mux.Handle("/console/", a.opts.Console)
		mux.HandleFunc("GET /sign-in", a.serveSignIn)
	}
	return mux
}

func (a *App) servePage(w http.ResponseWriter, r *http.Request) {
	owner, ok := Owner(r)
	if !ok {
		owner = "browser-" + randomHex(8)
		http.SetCookie(w, &http.Cookie{Name: OwnerCookie, Value: owner, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // a new key for every rendered form
	err := page.Execute(w, struct {
		Owner, Key string
		Delay      time.Duration
	}{owner, "print-" + randomHex(12), a.opts.WorkDelay})
	if err != nil {
		a.logger.Error("render page", "err", err)
	}
}

// enqueue hands a job just created to the workers. When the queue is full
// the job waits in the store, pending, and the sweeper is asked to bring it
// in as room frees up: the HTTP request is never held for it.
func (a *App) enqueue(jobID string) {
	if !a.queue.offer(jobID) {
		select {
		case a.sweep <- struct{}{}:
		default: // a sweep is already asked for
		}
	}
}

// Run works on jobs until ctx ends. It sweeps the store for pending jobs
// when it starts (jobs left by a previous run), when the queue overflows,
// and every SweepInterval.
func (a *App) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range a.opts.Workers {
		wg.Go(func() {
			for {
				id, ok := a.queue.take(ctx)
				if !ok {
					return
				}
				a.work(ctx, id)
				a.queue.done(id)
			}
		})
	}
	tick := time.NewTicker(a.opts.SweepInterval)
	defer tick.Stop()
	for {
		if err := a.sweepPending(ctx); err != nil && ctx.Err() == nil {
			a.logger.Error("sweep pending jobs", "err", err) // the next sweep tries again
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-a.sweep:
		case <-tick.C:
		}
	}
}

// sweepPending hands every pending job in the store that the queue does not
// hold to the workers, waiting for room as they work, so that however many
// jobs are pending, only QueueSize of them wait in memory.
func (a *App) sweepPending(ctx context.Context) error {
	lister, ok := a.m.Store().(jobs.JobLister)
	if !ok {
		return fmt.Errorf("sweep: a %T cannot list its jobs", a.m.Store())
	}
	after := ""
	for {
		// Print jobs only: the store also holds the records of the
		// console's actions, which are not the workers'.
		page, err := lister.ListJobs(ctx, jobs.JobQuery{States: []jobs.JobState{jobs.JobPending}, Kind: "print", After: after, Limit: 500})
		if err != nil || len(page) == 0 {
			return err
		}
		for _, j := range page {
			if err := a.queue.put(ctx, j.ID); err != nil {
				return err
			}
		}
		after = page[len(page)-1].ID
	}
}

// work runs one attempt of the job: a pretend print that takes WorkDelay.
func (a *App) work(ctx context.Context, jobID string) {
	att, err := a.m.StartAttempt(ctx, jobID, "")
	if err != nil {
		if !errors.Is(err, jobs.ErrAttemptInFlight) && !errors.Is(err, jobs.ErrJobClosed) && ctx.Err() == nil {
			a.logger.Error("start attempt", "job", jobID, "err", err)
		}
		return
	}
	if !sleep(ctx, a.opts.WorkDelay/2) {
		a.m.MarkUnknown(context.WithoutCancel(ctx), att.ID, "worker stopped")
		return
	}
	// The printer takes the request under the attempt's key and answers
	// with its reference, which the worker records (unless the answer is
	// lost: then the attempt is in doubt, and the printer prints on).
	ref := a.spool.take(att.ProviderKey())
	lost := mathrand.Float64() < a.opts.LostAcks
	if lost {
		if _, err := a.m.MarkUnknown(ctx, att.ID, "the printer's acknowledgement never arrived"); err != nil {
			a.logger.Error("mark unknown", "attempt", att.ID, "err", err)
		}
	} else if _, err := a.m.MarkRunning(ctx, att.ID, ref); err != nil {
		a.logger.Error("mark running", "attempt", att.ID, "err", err)
		return
	}
	stopped := !sleep(ctx, a.opts.WorkDelay-a.opts.WorkDelay/2)
	job, err := a.m.Get(context.WithoutCancel(ctx), jobID)
	if err != nil {
		a.logger.Error("get job", "job", jobID, "err", err)
		return
	}
	var params struct {
		Pages int `json:"pages"`
	}
	json.Unmarshal(job.Params, &params)
	result, _ := json.Marshal(map[string]any{"printed_pages": params.Pages, "printer": att.Provider, "attempt": att.Seq, "spool": ref})
	a.spool.finish(ref, result)
	if lost {
		return // the worker never hears back; the Reconciler asks the spool
	}
	if stopped {
		a.m.MarkUnknown(context.WithoutCancel(ctx), att.ID, "worker stopped")
		return
	}
	if _, err := a.m.Complete(ctx, att.ID, result); err != nil {
		a.logger.Error("complete", "attempt", att.ID, "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
