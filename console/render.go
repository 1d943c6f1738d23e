package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the navigation entry to mark as current
	P      Principal
	Prefix string
	Live   string // the live feed of the page, if it updates itself
	Sig    string // what the page shows, as the live feed compares it
	Status int
	Data   any
}

// parseTemplates parses the layout with each page.
func parseTemplates(h *Handler) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"path":    h.path,
		"stamp":   stamp,
		"ago":     func(t time.Time) string { return ago(h.o.Manager.Now().Sub(t)) },
		"dur":     ago,
		"short":   short,
		"percent": func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"operator": func(p Principal) bool {
			return p.Role == RoleOperator
		},
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimPrefix(n, "templates/")
		if base == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(files, n)
		if err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(base, ".html")] = t
	}
	return out, nil
}

// render writes the page name with data.
func (h *Handler) render(w http.ResponseWriter, name string, pg page) {
	var buf bytes.Buffer
	pg.Prefix = h.o.Prefix
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", pg); err != nil {
		h.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if pg.Status != 0 {
		w.WriteHeader(pg.Status)
	}
	w.Write(buf.Bytes())
}

// fail answers with an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, p Principal, status int, msg string) {
	h.render(w, "error", page{Title: http.StatusText(status), P: p, Status: status, Data: msg})
}

// failErr answers with the error page that err calls for: 404 for
// ErrNotFound, 400 for bad input, 501 for a store that cannot, 500
// otherwise (logged, not shown).
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, p Principal, err error) {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		h.fail(w, r, p, http.StatusNotFound, "Nothing by that name.")
	case errors.Is(err, jobs.ErrInvalidInput):
		h.fail(w, r, p, http.StatusBadRequest, err.Error())
	case errors.Is(err, errors.ErrUnsupported):
		h.fail(w, r, p, http.StatusNotImplemented, "The store cannot answer this: "+err.Error())
	default:
		h.log.ErrorContext(r.Context(), "console: request failed", "path", r.URL.Path, "error", err)
		h.fail(w, r, p, http.StatusInternalServerError, "Something went wrong reading the store; it is logged.")
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ago says a duration the way a person reads it: 4s, 3m12s, 2h05m, 3d4h.
func ago(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// short cuts an ID or token for a table cell.
func short(s string) string {
	if len(s) <= 14 {
		return s
	}
	return s[:14] + "…"
}

// pretty redacts v, a JSON value of a job of kind, and indents it.
func (h *Handler) pretty(kind, field string, v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	if h.o.Redact != nil {
		v = h.o.Redact(kind, field, v)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, v, "", "  "); err != nil {
		return string(v)
	}
	return buf.String()
}
