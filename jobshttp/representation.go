package jobshttp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// Receipt is the body of a 201 response to a POST: the job as it was
// created. It holds only what never changes, so that every replay of the
// request gets the same bytes as the first response, however far the job
// has progressed since. Its current state is at Href (the Location).
type Receipt struct {
	ID        string          `json:"id"`
	Key       string          `json:"key"`
	Kind      string          `json:"kind"`
	Provider  string          `json:"provider"`
	Params    json.RawMessage `json:"params"`
	CreatedAt time.Time       `json:"created_at"`
	Href      string          `json:"href"`
}

// JobView is the body of a GET, and of a POST that asked to wait: the job as
// it is when the response is written. It comes with an ETag that changes
// whenever the view does.
//
// Responses can arrive out of order (a held request answers after a later
// one), so a client that shows a job keeps the view it has unless the new
// one supersedes it; see Supersedes for the rule.
type JobView struct {
	ID       string          `json:"id"`
	Key      string          `json:"key"`
	Kind     string          `json:"kind"`
	Provider string          `json:"provider"`
	Params   json.RawMessage `json:"params"`
	State    jobs.JobState   `json:"state"`
	// Version counts the writes that changed the job's outcome: 1 while it
	// is open, higher once it is terminal. It never decreases.
	Version   int64           `json:"version"`
	Attempts  int             `json:"attempts"`         // attempts started so far; never decreases
	Result    json.RawMessage `json:"result,omitempty"` // when succeeded
	Reason    string          `json:"reason,omitempty"` // when failed or cancelled
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ClosedAt  *time.Time      `json:"closed_at,omitempty"` // when terminal
	Href      string          `json:"href"`
}

// Supersedes reports whether v shows a later state of the same job than
// old. The rule, for clients in any language:
//
//   - A terminal state (succeeded, failed, cancelled) is final: nothing
//     supersedes it.
//   - Otherwise a terminal v supersedes old; so does a higher version, and,
//     at the same version, more attempts.
//   - Views with the same version and attempts show the same state.
//
// Version and attempts never decrease over a job's life, and every change
// of state raises one of them, so whichever order responses arrive in, a
// client that keeps the superseding view ends on the job's latest state.
func (v JobView) Supersedes(old JobView) bool {
	switch {
	case v.ID != old.ID || old.State.Terminal():
		return false
	case v.State.Terminal():
		return true
	case v.Version != old.Version:
		return v.Version > old.Version
	default:
		return v.Attempts > old.Attempts
	}
}

func (h *Handler) receipt(j jobs.Job) Receipt {
	return Receipt{ID: j.ID, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: j.Params,
		CreatedAt: j.CreatedAt, Href: h.location(j.ID)}
}

func (h *Handler) view(j jobs.Job) JobView {
	v := JobView{ID: j.ID, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: j.Params,
		State: j.State, Version: j.Version, Attempts: j.Attempts, Result: j.Result, Reason: j.Reason,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, Href: h.location(j.ID)}
	if !j.ClosedAt.IsZero() {
		t := j.ClosedAt
		v.ClosedAt = &t
	}
	return v
}

// writeView answers with the JobView of j and its ETag. A GET or HEAD is
// cacheable by the client alone and only after revalidation (private,
// no-cache), and is answered 304 Not Modified when its If-None-Match names
// the view's ETag.
func (h *Handler) writeView(w http.ResponseWriter, r *http.Request, status int, j jobs.Job) {
	body, ok := h.encode(w, h.view(j))
	if !ok {
		return
	}
	etag := entityTag(body)
	hdr := w.Header()
	hdr.Set("ETag", etag)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		hdr.Set("Cache-Control", "private, no-cache")
		if noneMatch(r.Header.Values("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	h.writeBody(w, status, body)
}

// entityTag returns a strong entity tag for a representation: a digest of
// its bytes, so that it changes exactly when they do.
func entityTag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
}

// noneMatch reports whether an If-None-Match header (RFC 9110, 13.1.2)
// names etag: "*", or a list of entity tags compared weakly (W/ ignored).
func noneMatch(values []string, etag string) bool {
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "*" {
			return true
		}
		for v != "" {
			v = strings.TrimLeft(v, " \t,")
			v = strings.TrimPrefix(v, "W/")
			if !strings.HasPrefix(v, `"`) {
				break // not an entity tag: ignore the rest of the field
			}
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				break
			}
			if v[:end+2] == etag {
				return true
			}
			v = v[end+2:]
		}
	}
	return false
}
