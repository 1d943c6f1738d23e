package jobshttp

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem detail, the body of every error response
// (Content-Type: application/problem+json).
type Problem struct {
	Type   string `json:"type"`             // ProblemBase + one of the Problem* names
	Title  string `json:"title"`            // short, the same for every occurrence of Type
	Status int    `json:"status"`           // the HTTP status code
	Detail string `json:"detail,omitempty"` // this occurrence, for people

	// Job is the location of the job an idempotency key is bound to, on a
	// key conflict. Keys belong to one owner, so it is always the caller's
	// own job.
	Job string `json:"job,omitempty"`
}

// Problem types, appended to Options.ProblemBase to form a problem's type URI.
const (
	ProblemUnauthenticated      = "unauthenticated"          // 401
	ProblemKeyMissing           = "idempotency-key-missing"  // 400
	ProblemKeyInvalid           = "idempotency-key-invalid"  // 400
	ProblemKeyConflict          = "idempotency-key-conflict" // 422, or 409 with Options.ConflictStatus
	ProblemUnsupportedMediaType = "unsupported-media-type"   // 415
	ProblemBodyTooLarge         = "body-too-large"           // 413
	ProblemMalformedJSON        = "malformed-json"           // 400
	ProblemInvalidRequest       = "invalid-request"          // 422
	ProblemNotFound             = "not-found"                // 404
	ProblemMethodNotAllowed     = "method-not-allowed"       // 405
	ProblemUnavailable          = "unavailable"              // 503
	ProblemInternal             = "internal"                 // 500
)

// DefaultProblemBase is the default Options.ProblemBase.
const DefaultProblemBase = "https://pkg.go.dev/github.com/intentjobs/jobs/jobshttp#problem-"

func (h *Handler) problem(w http.ResponseWriter, status int, typ, title, detail string) {
	h.writeProblem(w, Problem{Type: h.opts.ProblemBase + typ, Title: title, Status: status, Detail: detail})
}

func (h *Handler) writeProblem(w http.ResponseWriter, p Problem) {
	body, _ := json.Marshal(p) // a struct of strings and an int
	hdr := w.Header()
	hdr.Set("Content-Type", "application/problem+json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Del("Location")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}
