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
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// App serves the page and the API and works on the jobs.
type App struct {
	m      *jobs.Manager
	opts   Options
	api    *jobshttp.Handler
	queue  chan string
	logger *slog.Logger
}

// New returns an App over m. Call Run to start its workers.
func New(m *jobs.Manager, opts Options) *App {
	if opts.WorkDelay <= 0 {
		opts.WorkDelay = 3 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &App{m: m, opts: opts, queue: make(chan string, 1024), logger: opts.Logger}
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

// Handler serves the page at / and the API at /jobs.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	a.api.Register(mux)
	mux.HandleFunc("GET /{$}", a.servePage)
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

func (a *App) enqueue(jobID string) {
	select {
	case a.queue <- jobID:
	default: // Run picks pending jobs up from the store when it starts
		a.logger.Warn("work queue full; the job stays pending", "job", jobID)
	}
}

// Run queues the jobs left pending in the store, then works on new ones
// until ctx ends.
func (a *App) Run(ctx context.Context) error {
	if l, ok := a.m.Store().(jobs.Lister); ok {
		after := ""
		for {
			page, err := l.ListJobs(ctx, after, 500)
			if err != nil {
				return err
			}
			if len(page) == 0 {
				break
			}
			for _, j := range page {
				if j.State == jobs.JobPending {
					a.enqueue(j.ID)
				}
			}
			after = page[len(page)-1].ID
		}
	}
	var wg sync.WaitGroup
	for range a.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-a.queue:
					a.work(ctx, id)
				}
			}
		}()
	}
	wg.Wait()
	return nil
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
	if _, err := a.m.MarkRunning(ctx, att.ID, "spool-"+randomHex(4)); err != nil {
		a.logger.Error("mark running", "attempt", att.ID, "err", err)
		return
	}
	if !sleep(ctx, a.opts.WorkDelay-a.opts.WorkDelay/2) {
		a.m.MarkUnknown(context.WithoutCancel(ctx), att.ID, "worker stopped")
		return
	}
	job, err := a.m.Get(ctx, jobID)
	if err != nil {
		a.logger.Error("get job", "job", jobID, "err", err)
		return
	}
	var params struct {
		Pages int `json:"pages"`
	}
	json.Unmarshal(job.Params, &params)
	result, _ := json.Marshal(map[string]any{"printed_pages": params.Pages, "printer": att.Provider, "attempt": att.Seq})
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
