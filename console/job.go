package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/inspect"
)

// jobData is the story of one job, as its page shows it.
type jobData struct {
	Story    inspect.Story
	Job      jobs.Job
	Params   string
	Result   string
	Attempts []attemptView
	Timeline []event
	Actions  []actionView
	Flash    *actionView // the action just taken, when the page follows it
	CanAct   bool        // the viewer is an operator
	Open     bool        // the job is pending or running
}

type attemptView struct {
	jobs.Attempt
	Reconcile     jobs.ReconcileState
	ResultDropped bool
	InDoubt       bool
	CanLookUp     bool
}

// event is one line of a job's timeline.
type event struct {
	At        time.Time
	What      string // short, e.g. "attempt 2 timed out"
	Detail    string
	Class     string // for the marker: ok, bad, doubt, info, operator
	AttemptID string
}

// serveJob shows a job's story.
func (h *Handler) serveJob(w http.ResponseWriter, r *http.Request, p Principal) {
	d, err := h.jobData(r.Context(), r.PathValue("id"), p)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	if id := r.URL.Query().Get("action"); id != "" {
		for i := range d.Actions {
			if d.Actions[i].ID == id {
				d.Flash = &d.Actions[i]
			}
		}
	}
	h.render(w, "job", page{Title: "Job " + d.Job.ID, Nav: "jobs", P: p, Data: d,
		Live: h.path("/live?page=job&id=" + d.Job.ID), Sig: sigStory(d.Story, d.Actions)})
}

// jobData reads what the page of job id shows, for p.
func (h *Handler) jobData(ctx context.Context, id string, p Principal) (jobData, error) {
	s, err := h.in.Story(ctx, id)
	if err != nil {
		return jobData{}, err
	}
	if !p.maysee(s.Job.Owner) {
		return jobData{}, fmt.Errorf("console: job %s: %w", id, jobs.ErrNotFound) // not even its existence
	}
	j := s.Job
	d := jobData{Story: s, Job: j, CanAct: p.Role == RoleOperator, Open: !j.State.Terminal(),
		Params: h.pretty(j.Kind, "params", j.Params), Result: h.pretty(j.Kind, "result", j.Result)}
	acts, err := h.actions(ctx, j)
	if err != nil {
		return jobData{}, err
	}
	d.Actions = acts
	d.Timeline = append(d.Timeline, event{At: j.CreatedAt, What: "job submitted", Class: "info",
		Detail: fmt.Sprintf("by owner %s under key %s, for provider %s (version 1)", j.Owner, j.Key, j.Provider)})
	for _, a := range s.Attempts {
		av := attemptView{Attempt: a, Reconcile: s.Reconcile[a.ID], ResultDropped: a.ResultDropped(),
			InDoubt: a.State.Open(), CanLookUp: h.o.Reconciler != nil && a.State.Open()}
		d.Attempts = append(d.Attempts, av)
		d.Timeline = append(d.Timeline, attemptEvents(j, av)...)
	}
	for _, act := range acts {
		d.Timeline = append(d.Timeline, event{At: act.At, What: "operator " + act.Actor + ": " + act.Title,
			Detail: act.Reason + " — " + act.Outcome, Class: "operator", AttemptID: act.AttemptID})
	}
	if j.State.Terminal() {
		what, class := "job "+string(j.State), "bad"
		detail := j.Reason
		if j.State == jobs.JobSucceeded {
			class, detail = "ok", "result from attempt "+j.CompletedBy
		}
		d.Timeline = append(d.Timeline, event{At: j.ClosedAt, What: what, Detail: fmt.Sprintf("%s (version %d)", detail, j.Version), Class: class})
	}
	if j.ReplacedBy != "" {
		d.Timeline = append(d.Timeline, event{At: j.UpdatedAt, What: "key taken over", Class: "info",
			Detail: "job " + j.ReplacedBy + " now holds the key"})
	}
	slices.SortStableFunc(d.Timeline, func(x, y event) int { return x.At.Compare(y.At) })
	return d, nil
}

// attemptEvents are the lines of a's life on the timeline. The store keeps
// an attempt's start, its last change and its end: an acknowledgement is
// shown with its reference, at its time when it is the last change.
func attemptEvents(j jobs.Job, a attemptView) []event {
	n := fmt.Sprintf("attempt %d", a.Seq)
	hedge := ""
	if a.Hedge {
		hedge = ", hedged"
	}
	out := []event{{At: a.CreatedAt, What: n + " started", Class: "info", AttemptID: a.ID,
		Detail: fmt.Sprintf("on %s%s, from job version %d", a.Provider, hedge, a.BaseVersion)}}
	if a.ProviderRef != "" {
		at := a.UpdatedAt
		if a.State.Terminal() {
			at = a.CreatedAt // its time is not kept; after the start
		}
		out = append(out, event{At: at, What: n + " acknowledged", Class: "info", AttemptID: a.ID,
			Detail: "provider reference " + a.ProviderRef})
	}
	if a.State == jobs.AttemptUnknown {
		out = append(out, event{At: a.UpdatedAt, What: n + " timed out: in doubt", Class: "doubt", AttemptID: a.ID, Detail: a.Reason})
	}
	if !a.Reconcile.LookupAt.IsZero() {
		out = append(out, event{At: a.Reconcile.LookupAt, What: n + " looked up", Class: "info", AttemptID: a.ID,
			Detail: "the provider answered: " + a.Reconcile.LookupAnswer})
	}
	if a.State.Terminal() {
		class := map[jobs.AttemptState]string{jobs.AttemptSucceeded: "ok", jobs.AttemptLost: "doubt"}[a.State]
		detail := a.Reason
		switch {
		case a.State == jobs.AttemptSucceeded:
			detail = fmt.Sprintf("won: its result is the job's (version %d)", a.BaseVersion+1)
		case a.ResultDropped:
			detail = "result dropped: " + a.Reason
		}
		what := map[jobs.AttemptState]string{jobs.AttemptSucceeded: "won", jobs.AttemptLost: "lost",
			jobs.AttemptFailed: "failed", jobs.AttemptCancelled: "cancelled"}[a.State]
		out = append(out, event{At: a.FinishedAt, What: n + " " + what, Class: cmp.Or(class, "bad"), AttemptID: a.ID, Detail: detail})
	}
	return out
}

// actionView is an operator's action on a job, as its record (a job of
// the console's own) tells.
type actionView struct {
	ID        string
	At        time.Time
	Actor     string
	Role      string
	Title     string
	Reason    string
	AttemptID string
	State     jobs.JobState
	Outcome   string // what came of it
	Result    string // the result given, redacted
	Done      bool
	Refused   bool
}

// actions reads the record of the operators' actions on j.
func (h *Handler) actions(ctx context.Context, j jobs.Job) ([]actionView, error) {
	lister, ok := h.o.Manager.Store().(jobs.JobLister)
	if !ok {
		return nil, nil
	}
	recs, err := lister.ListJobs(ctx, jobs.JobQuery{Owner: actionOwner(j.ID), Limit: 200})
	if err != nil {
		return nil, err
	}
	out := make([]actionView, 0, len(recs))
	for _, rec := range recs {
		var a actionParams
		if err := json.Unmarshal(rec.Params, &a); err != nil {
			continue
		}
		v := actionView{ID: rec.ID, At: rec.CreatedAt, Actor: a.Actor, Role: a.Role, Title: a.title(),
			Reason: a.Reason, AttemptID: a.AttemptID, State: rec.State}
		if len(a.Result) > 0 {
			v.Result = h.pretty(j.Kind, "result", a.Result)
		}
		switch rec.State {
		case jobs.JobSucceeded:
			var res actionResult
			_ = json.Unmarshal(rec.Result, &res)
			v.Outcome, v.Done = res.Outcome, true
		case jobs.JobFailed:
			v.Outcome, v.Refused = "refused: "+strings.TrimPrefix(rec.Reason, refusedPrefix), true
		default:
			v.Outcome = "in progress"
		}
		out = append(out, v)
	}
	return out, nil
}

// errorText is err's message without the packages' prefixes.
func errorText(err error) string {
	s := err.Error()
	for _, p := range []string{"jobs: ", "console: ", "failover: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}
