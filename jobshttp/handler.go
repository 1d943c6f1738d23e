package jobshttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/intentjobs/jobs"
)

// Response headers beyond the standard ones.
const (
	// HeaderReplayed is set to "true" on a response to a request whose key
	// had already created its job: the job was not created again.
	HeaderReplayed = "Idempotent-Replayed"

	// HeaderKeyRetention tells, in seconds, how long after a job is closed
	// (succeeded, failed or cancelled) its idempotency key is still honoured;
	// while the job is open its key always is. Within that time the same key
	// always leads to the same job, unless Options.KeyReuse frees the key of
	// a job that failed. Sent on every response to a POST.
	HeaderKeyRetention = "Idempotency-Key-Retention"
)

// keyInUseRetryAfter is the Retry-After of an idempotency-key-in-use
// answer, in seconds: an attempt in doubt is resolved by its runner, a
// reconciler or an operator, which takes minutes rather than seconds.
const keyInUseRetryAfter = "30"

// Defaults of Options.
const (
	DefaultPath         = "/jobs"
	DefaultMaxBodyBytes = 64 << 10 // 64 KiB
	DefaultMaxWait      = 60 * time.Second
)

// Options configures a Handler. Owner is required; the rest has defaults.
type Options struct {
	// Owner returns who makes the request, from the host application's
	// authentication (a user or tenant ID). ok == false (or an empty owner)
	// answers 401 unauthenticated; an owner the jobs package cannot store
	// (over 255 bytes, not UTF-8, with a NUL) answers 401 owner-invalid,
	// since it comes from the request's credentials. Jobs and keys are
	// scoped to their owner.
	Owner func(r *http.Request) (owner string, ok bool)

	// Challenge is the WWW-Authenticate header of a 401 response.
	// Defaults to "Bearer".
	Challenge string

	// Path is where the handler is mounted: POST Path creates a job, GET
	// Path/{id} reads one. Defaults to "/jobs". Locations are Path/{id}.
	Path string

	// MaxBodyBytes limits the request body; a larger one is answered with
	// 413. Defaults to DefaultMaxBodyBytes (the Manager's default limit on
	// params).
	MaxBodyBytes int64

	// ConflictStatus is the status of a key reused with a different request:
	// http.StatusUnprocessableEntity (422, the default, as the IETF
	// Idempotency-Key draft says) or http.StatusConflict (409). Generic
	// clients of the draft read 409 as "a request with this key is still
	// being processed" and may retry it; choose 409 only for clients that
	// know it means a conflict of intent here.
	ConflictStatus int

	// KeyRetention is how long keys are honoured after their job closes,
	// announced in the Idempotency-Key-Retention header. Defaults to the
	// Manager's retention (jobs.Options.Retention, 24 hours unless set), the
	// period after which Manager.Purge may delete a closed job and free its key.
	KeyRetention time.Duration

	// MaxWait caps the wait a client may ask for with Prefer: wait=N, in
	// whole seconds (at least one). Defaults to 60s. Keep it below the
	// server's WriteTimeout.
	MaxWait time.Duration

	// KeyReuse lets a POST take back the Idempotency-Key of a job that
	// failed (jobs.KeyReuseAfterFailure), or failed or was cancelled
	// (jobs.KeyReuseAfterFailureOrCancel): the same request then creates a
	// new job under the key, answered 201 without Idempotent-Replayed and
	// with the new job's Location, and later replays lead to the new job.
	// The old job stays readable at its own location. While an attempt of
	// the old job is starting, running or unknown (the provider may still
	// act on it), the request is answered 409 idempotency-key-in-use with
	// Retry-After, and nothing is written; an old job whose attempt's
	// result arrived after it was cancelled keeps its key (the request is
	// a replay). A request with other params is still a key conflict. The zero value, jobs.KeyReuseNever,
	// keeps a key bound to its job until the job is purged. New panics on
	// a value that is not a policy.
	KeyReuse jobs.KeyReuse

	// Check, if set, vets a request before it is submitted (allowed kinds and
	// providers, the shape of params). Its error is answered with 422 and
	// its text as the problem's detail; nothing is written. It runs only for
	// keys that have no job yet, or whose job KeyReuse lets a new one
	// replace (the handler looks the key up first): a replay of an existing
	// job is never checked again, so that a change of rules never keeps a
	// client from the job it already has.
	Check func(r *http.Request, req jobs.SubmitRequest) error

	// Created, if set, is called once for every job this handler creates
	// (never for a replay), before the response is written; use it to hand
	// the job's ID to a worker. Its context is not cancelled when the client
	// goes away. A job whose Created never ran (the process stopped in
	// between) is still pending in the store: workers should also pick up
	// pending jobs from there.
	Created func(ctx context.Context, j jobs.Job)

	// ProblemBase is prefixed to the problem codes (the Problem* names) to
	// form problem type URIs, e.g. "https://api.example.com/problems/" where
	// the host documents them itself. Defaults to DefaultProblemBase, this
	// package's README.md, where each code has a heading.
	ProblemBase string

	// Logger receives failures of the store (answered with 5xx) and owners
	// refused as owner-invalid (why, never the owner).
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Handler serves jobs over HTTP. Create one with New; it is safe for
// concurrent use.
type Handler struct {
	m    *jobs.Manager
	opts Options
}

// New returns a Handler that submits and reads jobs through m. It panics if
// opts.Owner is nil, opts.ConflictStatus is neither 0, 422 nor 409, or
// opts.KeyReuse is not one of the jobs.KeyReuse policies.
func New(m *jobs.Manager, opts Options) *Handler {
	if opts.Owner == nil {
		panic("jobshttp: Options.Owner is required")
	}
	switch opts.ConflictStatus {
	case 0:
		opts.ConflictStatus = http.StatusUnprocessableEntity
	case http.StatusConflict, http.StatusUnprocessableEntity:
	default:
		panic(fmt.Sprintf("jobshttp: Options.ConflictStatus must be 422 or 409, not %d", opts.ConflictStatus))
	}
	if !opts.KeyReuse.Valid() {
		panic(fmt.Sprintf("jobshttp: Options.KeyReuse %v is not a policy", opts.KeyReuse))
	}
	if opts.Challenge == "" {
		opts.Challenge = "Bearer"
	}
	if opts.Path == "" {
		opts.Path = DefaultPath
	}
	opts.Path = "/" + strings.Trim(opts.Path, "/")
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.KeyRetention <= 0 {
		opts.KeyRetention = m.Retention()
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	opts.MaxWait = max(opts.MaxWait.Truncate(time.Second), time.Second) // Prefer: wait counts seconds
	if opts.ProblemBase == "" {
		opts.ProblemBase = DefaultProblemBase
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{m: m, opts: opts}
}

// Register mounts h on mux at its Path: Path itself and everything below.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle(h.opts.Path, h)
	mux.Handle(h.opts.Path+"/", h)
}

// ServeHTTP routes POST Path to Create and GET or HEAD Path/{id} to Get.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == h.opts.Path:
		if r.Method != http.MethodPost {
			h.methodNotAllowed(w, "POST")
			return
		}
		h.Create(w, r)
	case strings.HasPrefix(p, h.opts.Path+"/") && !strings.Contains(p[len(h.opts.Path)+1:], "/") && len(p) > len(h.opts.Path)+1:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.methodNotAllowed(w, "GET, HEAD")
			return
		}
		h.Get(w, r, p[len(h.opts.Path)+1:])
	default:
		h.notFound(w)
	}
}

func (h *Handler) location(id string) string { return h.opts.Path + "/" + id }

// CreateRequest is the body of a POST.
type CreateRequest struct {
	Kind     string          `json:"kind"`     // the operation, e.g. "print"
	Provider string          `json:"provider"` // the target provider
	Params   json.RawMessage `json:"params"`   // any JSON value; omitted means null
}

// Create answers a POST: it submits the intent in the body under the
// request's Idempotency-Key for the request's owner. See the package
// documentation for the statuses.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(HeaderKeyRetention, strconv.FormatInt(int64(h.opts.KeyRetention/time.Second), 10))
	w.Header().Add("Vary", "Prefer")
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		code := ProblemKeyInvalid
		if errors.Is(err, errKeyMissing) {
			code = ProblemKeyMissing
		}
		h.problem(w, code, err.Error()+".")
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		w.Header().Set("Accept-Post", "application/json")
		h.problem(w, ProblemUnsupportedMediaType, "The request body must be application/json.")
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return
	}
	var cr CreateRequest
	if err := decodeStrict(body, &cr); err != nil {
		h.problem(w, ProblemMalformedJSON, err.Error())
		return
	}
	if len(cr.Params) == 0 {
		cr.Params = json.RawMessage("null")
	}
	req := jobs.SubmitRequest{Owner: owner, Key: key, Kind: cr.Kind, Provider: cr.Provider, Params: cr.Params, Reuse: h.opts.KeyReuse}
	if !h.check(w, r, req) {
		return
	}
	job, created, err := h.m.Submit(r.Context(), req)
	if err != nil {
		h.submitError(w, r, err)
		return
	}
	if created && h.opts.Created != nil {
		h.opts.Created(context.WithoutCancel(r.Context()), job)
	}
	hdr := w.Header()
	hdr.Set("Location", h.location(job.ID))
	if !created {
		hdr.Set(HeaderReplayed, "true")
	}
	if d, ok := preferredWait(r, h.opts.MaxWait); ok {
		// The job as it now is; if it cannot be read, the receipt, as
		// without the preference (the job exists either way).
		now, err := h.wait(r, job, d)
		if err == nil {
			hdr.Set("Preference-Applied", "wait="+strconv.Itoa(int(d/time.Second)))
			hdr.Set("Content-Location", h.location(job.ID))
			h.writeView(w, r, http.StatusCreated, now)
			return
		}
		if r.Context().Err() == nil {
			h.opts.Logger.WarnContext(r.Context(), "jobshttp: read the job after waiting; answering with the receipt", "job", job.ID, "err", err)
		}
	}
	h.writeJSON(w, http.StatusCreated, h.receipt(job))
}

// check runs Options.Check on a request whose key has no job yet, or a job
// that Options.KeyReuse lets a new one replace, and answers the request if
// it refuses. A key that keeps its job is not checked again: Submit answers
// it as a replay, or as a key conflict that names the job. Had the check's
// rules changed since the job was created, a client repeating its request
// would otherwise lose the way to its job.
func (h *Handler) check(w http.ResponseWriter, r *http.Request, req jobs.SubmitRequest) bool {
	if h.opts.Check == nil {
		return true
	}
	switch j, err := h.m.GetByKey(r.Context(), req.Owner, req.Key); {
	case err == nil && !req.Reuse.Frees(j.State):
		return true
	case err != nil && !errors.Is(err, jobs.ErrNotFound):
		h.submitError(w, r, err)
		return false
	}
	if err := h.opts.Check(r, req); err != nil {
		h.problem(w, ProblemInvalidRequest, err.Error())
		return false
	}
	return true
}

// Get answers a GET of the job id. Another owner's job is answered exactly
// like a job that does not exist.
func (h *Handler) Get(w http.ResponseWriter, r *http.Request, id string) {
	w.Header().Add("Vary", "Prefer")
	owner, ok := h.owner(w, r)
	if !ok {
		return
	}
	job, err := h.m.Get(r.Context(), id)
	if errors.Is(err, jobs.ErrNotFound) || errors.Is(err, jobs.ErrInvalidInput) || (err == nil && job.Owner != owner) {
		h.notFound(w)
		return
	}
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if d, ok := preferredWait(r, h.opts.MaxWait); ok {
		job, err = h.wait(r, job, d)
		switch {
		case errors.Is(err, jobs.ErrNotFound): // purged while we waited
			h.notFound(w)
			return
		case err != nil:
			h.storeError(w, r, err)
			return
		}
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(d/time.Second)))
	}
	h.writeView(w, r, http.StatusOK, job)
}

// wait holds the request until job is terminal, d has passed or the client
// has gone, and returns the job as it is at the moment of answering. A
// terminal job is final; a job still open is read once more, since what
// Manager.Wait last read may be older than that moment (its last poll, or a
// slow lookup that returned after the deadline), and a client shown an
// older state after a newer one would show the wrong one.
func (h *Handler) wait(r *http.Request, job jobs.Job, d time.Duration) (jobs.Job, error) {
	if job.State.Terminal() {
		return job, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	got, err := h.m.Wait(ctx, job.ID)
	cancel()
	switch {
	case err == nil:
		return got, nil // terminal
	case ctx.Err() == nil:
		h.opts.Logger.WarnContext(r.Context(), "jobshttp: wait", "job", job.ID, "err", err)
	}
	return h.m.Get(r.Context(), job.ID)
}

// owner returns the owner of r, or answers 401 and returns false: when the
// host's authentication names nobody, and when it names an owner that jobs
// cannot store. Owners come from credentials, so the second is a client's
// fault too (an overlong token, say), never the server's.
func (h *Handler) owner(w http.ResponseWriter, r *http.Request) (string, bool) {
	owner, ok := h.opts.Owner(r)
	if !ok || owner == "" {
		w.Header().Set("WWW-Authenticate", h.opts.Challenge)
		h.problem(w, ProblemUnauthenticated, "The request does not say who makes it.")
		return "", false
	}
	if fault := ownerFault(owner); fault != "" {
		h.invalidOwner(w, r, fault)
		return "", false
	}
	return owner, true
}

// maxOwnerBytes is the longest owner the jobs package stores.
const maxOwnerBytes = 255

// ownerFault says what makes owner one the jobs package refuses (it stores
// 1 to 255 bytes of UTF-8 without NUL), or "" if nothing does.
func ownerFault(owner string) string {
	switch {
	case len(owner) > maxOwnerBytes:
		return fmt.Sprintf("longer than %d bytes", maxOwnerBytes)
	case !utf8.ValidString(owner):
		return "not valid UTF-8"
	case strings.IndexByte(owner, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// invalidOwner answers 401 for an owner the jobs package refuses. The log
// says why, never the owner itself, which may be a credential.
func (h *Handler) invalidOwner(w http.ResponseWriter, r *http.Request, fault string) {
	h.opts.Logger.WarnContext(r.Context(), "jobshttp: the request's credentials name an owner jobs cannot store", "fault", fault)
	w.Header().Set("WWW-Authenticate", h.opts.Challenge)
	h.problem(w, ProblemOwnerInvalid, "The request's credentials name an owner that cannot hold jobs: "+fault+".")
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooLarge := func() {
		h.problem(w, ProblemBodyTooLarge, fmt.Sprintf("The request body must not exceed %d bytes.", h.opts.MaxBodyBytes))
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		tooLarge()
		return nil, errors.New("too large")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tooLarge()
		} else {
			h.problem(w, ProblemBodyUnreadable, "The request body could not be read.")
		}
		return nil, err
	}
	return body, nil
}

// decodeStrict decodes exactly one JSON object with no unknown fields.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("The request body is empty; send a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("The request body is not the expected JSON object: %s.", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("The request body has data after the JSON object.")
	}
	return nil
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func (h *Handler) submitError(w http.ResponseWriter, r *http.Request, err error) {
	var conflict *jobs.KeyConflictError
	var inFlight *jobs.AttemptInFlightError
	var input *jobs.InputError
	switch {
	case errors.As(err, &conflict):
		// The key is the caller's own (keys are scoped to owners), so the job
		// it is bound to is the caller's too.
		p := h.newProblem(ProblemKeyConflict, "This Idempotency-Key was first used with another kind, provider or params. "+
			"Repeat that request to get its job, or use a new key for a new request.")
		p.Status, p.Job = h.opts.ConflictStatus, h.location(conflict.JobID)
		h.writeProblem(w, p)
	case errors.As(err, &inFlight):
		// Options.KeyReuse would free the key, but an attempt of its job may
		// still make the provider act: a new job now could run the intent
		// twice. The key is free once that attempt's outcome is known.
		p := h.newProblem(ProblemKeyInUse, "The job of this Idempotency-Key ended, but its attempt "+inFlight.AttemptID+
			" is "+string(inFlight.State)+": the provider may still act on it. Repeat the request later with the same key; "+
			"it creates a new job once that attempt's outcome is known not to have acted.")
		p.Job = h.location(inFlight.JobID)
		w.Header().Set("Retry-After", keyInUseRetryAfter)
		h.writeProblem(w, p)
	case errors.As(err, &input) && input.Field == "Owner": // ownerFault let through what the Manager refuses
		h.invalidOwner(w, r, input.Problem)
	case errors.As(err, &input):
		h.problem(w, ProblemInvalidRequest, strings.ToLower(input.Field)+": "+input.Problem+".")
	default:
		h.storeError(w, r, err)
	}
}

func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var se *jobs.StorageError
	if errors.As(err, &se) && (se.Kind == jobs.StorageBusy || se.Kind == jobs.StorageUnavailable) || r.Context().Err() != nil {
		if r.Context().Err() == nil {
			h.opts.Logger.WarnContext(r.Context(), "jobshttp: store unavailable", "err", err)
		}
		w.Header().Set("Retry-After", "1")
		h.problem(w, ProblemUnavailable, "The job store is busy or unreachable; repeat the request with the same Idempotency-Key.")
		return
	}
	h.opts.Logger.ErrorContext(r.Context(), "jobshttp: store failure", "err", err)
	h.problem(w, ProblemInternal, "Repeat the request with the same Idempotency-Key.")
}

func (h *Handler) notFound(w http.ResponseWriter) {
	h.problem(w, ProblemNotFound, "")
}

func (h *Handler) methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	h.problem(w, ProblemMethodNotAllowed, "")
}

func (h *Handler) writeJSON(w http.ResponseWriter, status int, v any) {
	if body, ok := h.encode(w, v); ok {
		h.writeBody(w, status, body)
	}
}

// encode returns v as JSON with a final newline, or answers 500.
func (h *Handler) encode(w http.ResponseWriter, v any) ([]byte, bool) {
	body, err := json.Marshal(v)
	if err != nil { // only a Manager bug could put invalid JSON in a job
		h.opts.Logger.Error("jobshttp: encode response", "err", err)
		h.problem(w, ProblemInternal, "")
		return nil, false
	}
	return append(body, '\n'), true
}

// writeBody answers with a JSON body, not to be stored by caches unless
// Cache-Control says otherwise already.
func (h *Handler) writeBody(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	if hdr.Get("Cache-Control") == "" {
		hdr.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	w.Write(body)
}
