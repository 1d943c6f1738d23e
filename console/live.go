package console

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/inspect"
)

// serveLive is the feed of a live page: server-sent events that tell the
// browser when what the page shows has changed. Every LiveEvery it reads
// the page's data again and compares its signature with the last one the
// browser has (the page's own, then each sent); a change is sent as one
// "change" event, however many writes made it, so that a busy job or
// queue causes at most one refresh per LiveEvery. On a store that
// announces closed jobs (jobs.CloseNotifier, PostgreSQL's LISTEN), a job's
// page is also read again as soon as the job closes.
func (h *Handler) serveLive(w http.ResponseWriter, r *http.Request, p Principal) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusNotImplemented)
		return
	}
	q := r.URL.Query()
	sign, err := h.signer(r, p)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	ctx := r.Context()
	// The page must be one the actor may see, now: a job of another owner,
	// or of no one, answers as its page would.
	if _, err := sign(ctx); err != nil {
		h.failErr(w, r, p, err)
		return
	}
	var wake <-chan struct{}
	if q.Get("page") == "job" {
		if cn, ok := h.o.Manager.Store().(jobs.CloseNotifier); ok {
			if ch, stop, err := cn.NotifyClosed(ctx, q.Get("id")); err == nil {
				defer stop()
				wake = ch
			}
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 5000\n\n")
	flusher.Flush()

	last := q.Get("sig")
	tick := time.NewTicker(h.o.LiveEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-wake:
		}
		sig, err := sign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.WarnContext(ctx, "console: live page", "error", err)
			continue
		}
		if sig == last {
			// A keep-alive comment, so that proxies keep the stream open
			// and a closed browser is noticed.
			fmt.Fprint(w, ": .\n\n")
			flusher.Flush()
			continue
		}
		last = sig
		fmt.Fprintf(w, "event: change\ndata: %s\n\n", sig)
		flusher.Flush()
	}
}

// signer returns what reads the signature of the live page the request
// names.
func (h *Handler) signer(r *http.Request, p Principal) (func(context.Context) (string, error), error) {
	q := r.URL.Query()
	switch q.Get("page") {
	case "job":
		id := q.Get("id")
		return func(ctx context.Context) (string, error) {
			d, err := h.jobData(ctx, id, p)
			if err != nil {
				return "", err
			}
			return sigStory(d.Story, d.Actions), nil
		}, nil
	case "in-doubt":
		return func(ctx context.Context) (string, error) {
			ds, err := h.in.InDoubt(ctx, inspect.InDoubtQuery{Limit: 200, Owners: p.Owners})
			if err != nil {
				return "", err
			}
			return sigDoubts(ds), nil
		}, nil
	case "list":
		f, err := inspect.ParseFilter(q)
		if err != nil {
			return nil, err
		}
		if err := scope(p, &f); err != nil {
			return nil, err
		}
		return func(ctx context.Context) (string, error) {
			pg, err := h.in.List(ctx, f)
			if err != nil {
				return "", err
			}
			return sigJobs(pg.Jobs), nil
		}, nil
	}
	return nil, fmt.Errorf("console: no live page %q: %w", q.Get("page"), jobs.ErrInvalidInput)
}

// signature hashes the parts of what a page shows.
func signature(parts []string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func sigJobs(js []jobs.Job) string {
	parts := make([]string, len(js))
	for i, j := range js {
		parts[i] = fmt.Sprint(j.ID, j.Version, j.State, j.Attempts, j.UpdatedAt.UnixMicro())
	}
	return signature(parts)
}

func sigStory(s inspect.Story, acts []actionView) string {
	parts := []string{sigJobs(append([]jobs.Job{s.Job}, s.Chain...))}
	for _, a := range s.Attempts {
		r := s.Reconcile[a.ID]
		parts = append(parts, fmt.Sprint(a.ID, a.State, a.ProviderRef, a.UpdatedAt.UnixMicro(), r.LookupAt.UnixMicro(), r.ClaimedUntil.UnixMicro()))
	}
	for _, a := range acts {
		parts = append(parts, a.ID+string(a.State))
	}
	return signature(parts)
}

func sigDoubts(ds []inspect.Doubt) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprint(d.Attempt.ID, d.Attempt.State, d.Attempt.UpdatedAt.UnixMicro(), d.Reconcile.LookupAt.UnixMicro(), d.Reconcile.ClaimedUntil.UnixMicro())
	}
	return signature(parts)
}
