package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/inspect"
)

// scope applies p's owners to f: an actor limited to some owners lists
// one of them at a time, the one asked for or the first.
func scope(p Principal, f *inspect.Filter) error {
	if p.Owners == nil {
		return nil
	}
	if f.Owner == "" {
		if len(p.Owners) == 0 {
			return fmt.Errorf("console: no owner's jobs may be seen: %w", jobs.ErrNotFound)
		}
		f.Owner = p.Owners[0]
		return nil
	}
	if !p.maysee(f.Owner) {
		return fmt.Errorf("console: owner %q: %w", f.Owner, jobs.ErrNotFound)
	}
	return nil
}

type listData struct {
	Filter  inspect.Filter
	States  []stateOption
	Jobs    []jobs.Job
	Next    string // URL of the next page
	First   string // URL of the first page, when this is not it
	Count   int64
	Counted bool
	CountAt string // URL that counts
	Owners  []string
}

type stateOption struct {
	State   jobs.JobState
	Checked bool
}

// serveList lists the jobs a filter selects, with the search forms.
func (h *Handler) serveList(w http.ResponseWriter, r *http.Request, p Principal) {
	f, err := inspect.ParseFilter(r.URL.Query())
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	if err := scope(p, &f); err != nil {
		h.failErr(w, r, p, err)
		return
	}
	pg, err := h.in.List(r.Context(), f)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	d := listData{Filter: f, Jobs: pg.Jobs, Owners: p.Owners}
	for _, s := range []jobs.JobState{jobs.JobPending, jobs.JobRunning, jobs.JobSucceeded, jobs.JobFailed, jobs.JobCancelled} {
		d.States = append(d.States, stateOption{s, slices.Contains(f.States, s)})
	}
	v := f.Values()
	if pg.Next != "" {
		next := cloneValues(v)
		next.Set("after", pg.Next)
		d.Next = h.path("/?" + next.Encode())
	}
	if f.After != "" {
		d.First = h.path("/?" + v.Encode())
	}
	if r.URL.Query().Get("count") == "1" {
		if d.Count, err = h.in.Count(r.Context(), f); err != nil {
			h.failErr(w, r, p, err)
			return
		}
		d.Counted = true
	} else {
		c := cloneValues(v)
		c.Set("count", "1")
		d.CountAt = h.path("/?" + c.Encode())
	}
	live := cloneValues(r.URL.Query())
	live.Set("page", "list")
	h.render(w, "list", page{Title: "Jobs", Nav: "jobs", P: p, Data: d,
		Live: h.path("/live?" + live.Encode()), Sig: sigJobs(pg.Jobs)})
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

type searchData struct {
	Q, Owner, Key string
	Found         inspect.Found
}

// serveSearch finds what the query names; one job found shows its page.
func (h *Handler) serveSearch(w http.ResponseWriter, r *http.Request, p Principal) {
	q := r.URL.Query()
	d := searchData{Q: strings.TrimSpace(q.Get("q")), Owner: q.Get("owner"), Key: q.Get("key")}
	switch {
	case d.Owner != "" || d.Key != "":
		if d.Owner == "" || d.Key == "" {
			h.fail(w, r, p, http.StatusBadRequest, "Give both the owner and the key.")
			return
		}
		j, err := h.in.FindByKey(r.Context(), d.Owner, d.Key)
		switch {
		case err == nil && p.maysee(j.Owner):
			d.Found.Jobs = []jobs.Job{j}
		case err != nil && !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrInvalidInput):
			h.failErr(w, r, p, err)
			return
		}
	case d.Q != "":
		f, err := h.in.Find(r.Context(), d.Q)
		if err != nil {
			h.failErr(w, r, p, err)
			return
		}
		for _, j := range f.Jobs {
			if p.maysee(j.Owner) {
				d.Found.Jobs = append(d.Found.Jobs, j)
			}
		}
		for _, a := range f.Attempts {
			if slices.ContainsFunc(d.Found.Jobs, func(j jobs.Job) bool { return j.ID == a.JobID }) {
				d.Found.Attempts = append(d.Found.Attempts, a)
			}
		}
	}
	if len(d.Found.Jobs) == 1 {
		target := h.path("/jobs/" + url.PathEscape(d.Found.Jobs[0].ID))
		if len(d.Found.Attempts) == 1 {
			target += "#" + d.Found.Attempts[0].ID
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	h.render(w, "search", page{Title: "Search", Nav: "jobs", P: p, Data: d})
}

// serveInDoubt lists the attempts in doubt.
func (h *Handler) serveInDoubt(w http.ResponseWriter, r *http.Request, p Principal) {
	ds, err := h.in.InDoubt(r.Context(), inspect.InDoubtQuery{Limit: 200, Owners: p.Owners})
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	h.render(w, "indoubt", page{Title: "In doubt", Nav: "indoubt", P: p,
		Data: inDoubtData{Doubts: ds, CanLookUp: h.o.Reconciler != nil},
		Live: h.path("/live?page=in-doubt"), Sig: sigDoubts(ds)})
}

type inDoubtData struct {
	Doubts    []inspect.Doubt
	CanLookUp bool
}

// serveProviders sums up the providers.
func (h *Handler) serveProviders(w http.ResponseWriter, r *http.Request, p Principal) {
	if p.Owners != nil {
		h.fail(w, r, p, http.StatusForbidden, "The providers' figures count every owner's jobs; they are shown to those who may see every owner.")
		return
	}
	window := 24 * time.Hour
	if s := r.URL.Query().Get("window"); s != "" {
		d, err := inspect.ParseAge("window", s)
		if err != nil || d < time.Hour || d > 90*24*time.Hour {
			h.fail(w, r, p, http.StatusBadRequest, "The window is an age between 1h and 90d, such as 6h or 7d.")
			return
		}
		window = d
	}
	rep, err := h.in.Providers(r.Context(), inspect.ProvidersQuery{Window: window, Buckets: 24})
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	h.render(w, "providers", page{Title: "Providers", Nav: "providers", P: p,
		Data: h.providersView(rep, p)})
}
