package console

import (
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
	"github.com/intentjobs/jobs/inspect"
)

//go:embed templates assets
var files embed.FS

// Role is what an actor may do in the console.
type Role int

// Roles.
const (
	RoleViewer   Role = iota + 1 // reads every page
	RoleOperator                 // reads, and takes actions
)

// String names the role: "viewer" or "operator".
func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Principal is who makes a request, as Options.Authorize tells.
type Principal struct {
	// Actor names the person (or service) for the record of the actions
	// they take: "alice@example.com".
	Actor string
	Role  Role
	// Owners, if not nil, are the only owners whose jobs the actor may
	// see or act on (a tenant's operators on a shared host); nil means
	// every owner.
	Owners []string
}

// ErrUnauthenticated is what Options.Authorize returns (or wraps) for a
// request that carries no valid credentials: the console answers 401 with
// Options.Challenge as WWW-Authenticate. Any other error is 403.
var ErrUnauthenticated = errors.New("console: not authenticated")

// Options configure a console. Manager and Authorize are required.
type Options struct {
	Manager *jobs.Manager

	// Authorize tells who makes the request and what they may do. It runs
	// for every request, assets aside. An error matching
	// ErrUnauthenticated answers 401, any other 403, and so does a
	// Principal without an Actor or with a Role other than RoleViewer or
	// RoleOperator.
	Authorize func(r *http.Request) (Principal, error)

	// Challenge is the WWW-Authenticate header of a 401 answer, e.g.
	// `Basic realm="console"`; empty sends none.
	Challenge string

	// Prefix is the path the console is mounted under, without a trailing
	// slash: "/console" for mux.Handle("/console/", h). The handler
	// strips it itself.
	Prefix string

	// Redact, if not nil, is given every JSON value the console shows
	// (field "params" or "result" of a job of the kind, or of an action on
	// it) and returns what to show instead: the host hides card numbers,
	// personal data or secrets there. Without it, values are shown as
	// stored.
	Redact func(kind, field string, v json.RawMessage) json.RawMessage

	// Reconciler, if not nil, lets operators have an attempt in doubt
	// looked up at once (failover.Reconciler.ReconcileAttempt); without it
	// that action is not offered.
	Reconciler *failover.Reconciler

	// FormKey signs the forms of actions, binding each to its actor. Give
	// every instance of the host the same key (32 random bytes) so that a
	// form one served is accepted by another; nil uses a random key per
	// process.
	FormKey []byte

	// LiveEvery is how often a live page's data is compared with what the
	// browser shows, and so the most often it is told to refresh.
	// Defaults to 2 seconds.
	LiveEvery time.Duration

	// Logger defaults to the Manager's.
	Logger *slog.Logger
}

// Handler is the console. Create one with New.
type Handler struct {
	o     Options
	in    *inspect.Inspector
	pages map[string]*template.Template
	mux   *http.ServeMux
	root  http.Handler
	key   []byte
	log   *slog.Logger
}

// Errors of New.
var (
	ErrNoManager   = errors.New("console: Options.Manager is required")
	ErrNoAuthorize = errors.New("console: Options.Authorize is required: the console has no open default")
)

// New returns the console for o. It refuses Options without a Manager or
// an Authorize function.
func New(o Options) (*Handler, error) {
	if o.Manager == nil {
		return nil, ErrNoManager
	}
	if o.Authorize == nil {
		return nil, ErrNoAuthorize
	}
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/")) {
		return nil, fmt.Errorf("console: Options.Prefix %q must start with / and not end with one: %w", o.Prefix, jobs.ErrInvalidInput)
	}
	if o.LiveEvery <= 0 {
		o.LiveEvery = 2 * time.Second
	}
	h := &Handler{o: o, in: inspect.New(o.Manager), key: o.FormKey, log: o.Logger}
	if h.log == nil {
		h.log = o.Manager.Options().Logger
	}
	if len(h.key) == 0 {
		h.key = []byte(rand.Text() + rand.Text())
	}
	var err error
	if h.pages, err = parseTemplates(h); err != nil {
		return nil, err
	}
	assets, _ := fs.Sub(files, "assets")
	h.mux = http.NewServeMux()
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	h.mux.Handle("GET /{$}", h.authorized(h.serveList))
	h.mux.Handle("GET /search", h.authorized(h.serveSearch))
	h.mux.Handle("GET /jobs/{id}", h.authorized(h.serveJob))
	h.mux.Handle("GET /in-doubt", h.authorized(h.serveInDoubt))
	h.mux.Handle("GET /providers", h.authorized(h.serveProviders))
	h.mux.Handle("GET /confirm", h.authorized(h.serveConfirm))
	h.mux.Handle("POST /actions", h.authorized(h.serveAction))
	h.mux.Handle("GET /live", h.authorized(h.serveLive))
	h.mux.Handle("/", h.authorized(func(w http.ResponseWriter, r *http.Request, p Principal) {
		h.fail(w, r, p, http.StatusNotFound, "No such page.")
	}))
	cop := http.NewCrossOriginProtection()
	root := http.Handler(cop.Handler(h.mux))
	if o.Prefix != "" {
		root = http.StripPrefix(o.Prefix, root)
	}
	h.root = root
	return h, nil
}

// ServeHTTP serves the console.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	h.root.ServeHTTP(w, r)
}

// path is the URL of a page of the console, under its prefix.
func (h *Handler) path(p string) string { return h.o.Prefix + p }

type principalKey struct{}

// authorized runs fn for requests that Authorize lets through.
func (h *Handler) authorized(fn func(w http.ResponseWriter, r *http.Request, p Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.o.Authorize(r)
		switch {
		case errors.Is(err, ErrUnauthenticated):
			if h.o.Challenge != "" {
				w.Header().Set("WWW-Authenticate", h.o.Challenge)
			}
			h.fail(w, r, Principal{}, http.StatusUnauthorized, "Sign in to use the console.")
			return
		case err != nil:
			h.fail(w, r, Principal{}, http.StatusForbidden, "You may not use the console.")
			return
		case p.Actor == "" || (p.Role != RoleViewer && p.Role != RoleOperator):
			h.fail(w, r, Principal{}, http.StatusForbidden, "You may not use the console.")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		fn(w, r, p)
	})
}

// maysee reports whether p may see the jobs of owner.
func (p Principal) maysee(owner string) bool {
	return p.Owners == nil || slices.Contains(p.Owners, owner)
}
