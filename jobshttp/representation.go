package jobshttp

import (
	"encoding/json"
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
// it is now.
type JobView struct {
	ID        string          `json:"id"`
	Key       string          `json:"key"`
	Kind      string          `json:"kind"`
	Provider  string          `json:"provider"`
	Params    json.RawMessage `json:"params"`
	State     jobs.JobState   `json:"state"`
	Attempts  int             `json:"attempts"`
	Result    json.RawMessage `json:"result,omitempty"` // when succeeded
	Reason    string          `json:"reason,omitempty"` // when failed or cancelled
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	ClosedAt  *time.Time      `json:"closed_at,omitempty"` // when terminal
	Href      string          `json:"href"`
}

func (h *Handler) receipt(j jobs.Job) Receipt {
	return Receipt{ID: j.ID, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: j.Params,
		CreatedAt: j.CreatedAt, Href: h.location(j.ID)}
}

func (h *Handler) view(j jobs.Job) JobView {
	v := JobView{ID: j.ID, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: j.Params,
		State: j.State, Attempts: j.Attempts, Result: j.Result, Reason: j.Reason,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, Href: h.location(j.ID)}
	if !j.ClosedAt.IsZero() {
		t := j.ClosedAt
		v.ClosedAt = &t
	}
	return v
}
