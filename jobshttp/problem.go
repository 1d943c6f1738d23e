package jobshttp

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem detail, the body of every error response
// (Content-Type: application/problem+json).
type Problem struct {
	Type   string `json:"type"`             // ProblemBase followed by Code
	Code   string `json:"code"`             // one of the Problem* names: stable, for programs
	Title  string `json:"title"`            // short, the same for every occurrence of Type
	Status int    `json:"status"`           // the HTTP status code
	Detail string `json:"detail,omitempty"` // this occurrence, for people

	// Job is the location of the job an idempotency key is bound to, on a
	// key conflict or a key still in use. Keys belong to one owner, so it
	// is always the caller's own job.
	Job string `json:"job,omitempty"`
}

// Problem codes: the code member of a problem, and appended to
// Options.ProblemBase, its type URI. Each is documented under its own
// heading in this package's README.md, where the default type URIs lead.
const (
	ProblemUnauthenticated      = "unauthenticated"          // 401
	ProblemOwnerInvalid         = "owner-invalid"            // 401
	ProblemKeyMissing           = "idempotency-key-missing"  // 400
	ProblemKeyInvalid           = "idempotency-key-invalid"  // 400
	ProblemKeyConflict          = "idempotency-key-conflict" // 422, or 409 with Options.ConflictStatus
	ProblemKeyInUse             = "idempotency-key-in-use"   // 409
	ProblemUnsupportedMediaType = "unsupported-media-type"   // 415
	ProblemBodyTooLarge         = "body-too-large"           // 413
	ProblemBodyUnreadable       = "body-unreadable"          // 400
	ProblemMalformedJSON        = "malformed-json"           // 400
	ProblemInvalidRequest       = "invalid-request"          // 422
	ProblemNotFound             = "not-found"                // 404
	ProblemMethodNotAllowed     = "method-not-allowed"       // 405
	ProblemUnavailable          = "unavailable"              // 503
	ProblemInternal             = "internal"                 // 500
)

// problemTypes holds the status and title of every problem code. The status
// of ProblemKeyConflict is its default; Options.ConflictStatus may change it.
var problemTypes = map[string]struct {
	status int
	title  string
}{
	ProblemUnauthenticated:      {http.StatusUnauthorized, "Unauthenticated"},
	ProblemOwnerInvalid:         {http.StatusUnauthorized, "Credentials name no valid owner"},
	ProblemKeyMissing:           {http.StatusBadRequest, "Idempotency-Key required"},
	ProblemKeyInvalid:           {http.StatusBadRequest, "Invalid Idempotency-Key"},
	ProblemKeyConflict:          {http.StatusUnprocessableEntity, "Idempotency-Key already used for a different request"},
	ProblemKeyInUse:             {http.StatusConflict, "The job of this Idempotency-Key may still act"},
	ProblemUnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported Media Type"},
	ProblemBodyTooLarge:         {http.StatusRequestEntityTooLarge, "Request body too large"},
	ProblemBodyUnreadable:       {http.StatusBadRequest, "Unreadable request body"},
	ProblemMalformedJSON:        {http.StatusBadRequest, "Malformed JSON"},
	ProblemInvalidRequest:       {http.StatusUnprocessableEntity, "Invalid request"},
	ProblemNotFound:             {http.StatusNotFound, "Not Found"},
	ProblemMethodNotAllowed:     {http.StatusMethodNotAllowed, "Method Not Allowed"},
	ProblemUnavailable:          {http.StatusServiceUnavailable, "Service Unavailable"},
	ProblemInternal:             {http.StatusInternalServerError, "Internal Server Error"},
}

// DefaultProblemBase is the default Options.ProblemBase: the problem types'
// documentation, one heading per code.
const DefaultProblemBase = "https://github.com/intentjobs/jobs/blob/main/jobshttp/README.md#"

// newProblem returns the problem of the given code, with its status, title
// and type URI.
func (h *Handler) newProblem(code, detail string) Problem {
	pt := problemTypes[code]
	return Problem{Type: h.opts.ProblemBase + code, Code: code, Title: pt.title, Status: pt.status, Detail: detail}
}

// problem answers with the problem of the given code.
func (h *Handler) problem(w http.ResponseWriter, code, detail string) {
	h.writeProblem(w, h.newProblem(code, detail))
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
