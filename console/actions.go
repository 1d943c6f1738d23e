package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// EventOperatorAction is the event the console emits, through the
// Manager's Observer, for every action an operator takes: JobID and
// AttemptID name what it acted on, Reason says who did what, why, and
// what came of it.
const EventOperatorAction jobs.EventType = "console.action"

// The actions.
const (
	actionResolve   = "resolve"    // an attempt in doubt: succeeded (with a result), failed or cancelled
	actionCancelJob = "cancel-job" // the job
	actionLookup    = "lookup"     // an attempt in doubt, by the Reconciler, now
)

// actionOwner is the owner of the records of the actions on the job jobID:
// each action is a job of the console's own, under the idempotency key its
// form carries, so that a form sent twice acts once, and the actions on a
// job are listed by their owner.
func actionOwner(jobID string) string { return "console/" + jobID }

// refusedPrefix starts the reason of an action that the job's state no
// longer allowed.
const refusedPrefix = "refused: "

// actionTimeout bounds how long an action may take, a lookup at the
// provider included.
const actionTimeout = time.Minute

// maxReason bounds an operator's reason.
const maxReason = 1000

// actionParams are the parameters of an action's record.
type actionParams struct {
	Action    string          `json:"action"`
	JobID     string          `json:"job_id"`
	AttemptID string          `json:"attempt_id,omitempty"`
	Outcome   string          `json:"outcome,omitempty"` // for resolve
	Result    json.RawMessage `json:"result,omitempty"`  // for resolve as succeeded
	Reason    string          `json:"reason"`
	Actor     string          `json:"actor"`
	Role      string          `json:"role"`
}

// actionResult is the result of an action's record that took effect.
type actionResult struct {
	Outcome string `json:"outcome"`
}

func (a actionParams) title() string {
	switch a.Action {
	case actionResolve:
		return fmt.Sprintf("resolve attempt %s as %s", a.AttemptID, a.Outcome)
	case actionCancelJob:
		return "cancel the job"
	case actionLookup:
		return fmt.Sprintf("look attempt %s up now", a.AttemptID)
	}
	return a.Action
}

// refusal is an action that the state no longer allows: nothing changed.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// formToken binds a form's idempotency key to the actor it was made for.
func (h *Handler) formToken(actor, key string) string {
	mac := hmac.New(sha256.New, h.key)
	mac.Write([]byte(actor))
	mac.Write([]byte{0})
	mac.Write([]byte(key))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

type confirmData struct {
	Action    actionParams
	Title     string
	Job       jobs.Job
	Attempt   jobs.Attempt
	Key       string
	Token     string
	Refused   string // why the action cannot be taken now
	NeedsJSON bool
}

// serveConfirm shows the form that confirms an action, with its reason.
func (h *Handler) serveConfirm(w http.ResponseWriter, r *http.Request, p Principal) {
	if p.Role != RoleOperator {
		h.fail(w, r, p, http.StatusForbidden, "Only operators take actions; you may read.")
		return
	}
	q := r.URL.Query()
	a := actionParams{Action: q.Get("action"), JobID: q.Get("job"), AttemptID: q.Get("attempt"), Outcome: q.Get("outcome")}
	if err := checkAction(a, h); err != nil {
		h.fail(w, r, p, http.StatusBadRequest, err.Error())
		return
	}
	j, at, err := h.target(r.Context(), a, p)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	key := "act_" + rand.Text()
	d := confirmData{Action: a, Title: a.title(), Job: j, Attempt: at, Key: key, Token: h.formToken(p.Actor, key),
		NeedsJSON: a.Action == actionResolve && a.Outcome == string(jobs.AttemptSucceeded)}
	if err := allowed(a, j, at); err != nil {
		d.Refused = err.Error()
	}
	h.render(w, "confirm", page{Title: "Confirm: " + d.Title, Nav: "jobs", P: p, Data: d})
}

// checkAction reports an action that no state allows.
func checkAction(a actionParams, h *Handler) error {
	if a.JobID == "" {
		return errors.New("Name the job.")
	}
	switch a.Action {
	case actionResolve:
		switch jobs.AttemptState(a.Outcome) {
		case jobs.AttemptSucceeded, jobs.AttemptFailed, jobs.AttemptCancelled:
		default:
			return errors.New("An attempt is resolved as succeeded, failed or cancelled.")
		}
		fallthrough
	case actionLookup:
		if a.AttemptID == "" {
			return errors.New("Name the attempt.")
		}
		if a.Action == actionLookup && h.o.Reconciler == nil {
			return errors.New("This console has no reconciler to look attempts up with.")
		}
	case actionCancelJob:
	default:
		return errors.New("There is no such action.")
	}
	return nil
}

// target reads the job and attempt an action names, for p.
func (h *Handler) target(ctx context.Context, a actionParams, p Principal) (jobs.Job, jobs.Attempt, error) {
	m := h.o.Manager
	j, err := m.Get(ctx, a.JobID)
	if err != nil {
		return jobs.Job{}, jobs.Attempt{}, err
	}
	if !p.maysee(j.Owner) {
		return jobs.Job{}, jobs.Attempt{}, fmt.Errorf("console: job %s: %w", j.ID, jobs.ErrNotFound)
	}
	var at jobs.Attempt
	if a.AttemptID != "" {
		at, err = m.Attempt(ctx, a.AttemptID)
		if err != nil {
			return jobs.Job{}, jobs.Attempt{}, err
		}
		if at.JobID != j.ID {
			return jobs.Job{}, jobs.Attempt{}, fmt.Errorf("console: attempt %s of job %s: %w", at.ID, j.ID, jobs.ErrNotFound)
		}
	}
	return j, at, nil
}

// allowed reports, as a refusal, an action that the state of j and at no
// longer allows.
func allowed(a actionParams, j jobs.Job, at jobs.Attempt) error {
	switch a.Action {
	case actionResolve, actionLookup:
		if !at.State.Open() {
			return refuse("Attempt %d is already %s: there is nothing to resolve, and nothing was changed.", at.Seq, at.State)
		}
	case actionCancelJob:
		if j.State.Terminal() {
			return refuse("The job is already %s: it cannot be cancelled, and nothing was changed.", j.State)
		}
	}
	return nil
}

// serveAction takes an action: once per form, however often it is sent.
func (h *Handler) serveAction(w http.ResponseWriter, r *http.Request, p Principal) {
	if p.Role != RoleOperator {
		h.fail(w, r, p, http.StatusForbidden, "Only operators take actions; you may read.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, p, http.StatusBadRequest, "The form could not be read.")
		return
	}
	f := r.PostForm
	key, token := f.Get("key"), f.Get("token")
	if !strings.HasPrefix(key, "act_") || len(key) > 64 || !hmac.Equal([]byte(token), []byte(h.formToken(p.Actor, key))) {
		h.fail(w, r, p, http.StatusForbidden, "This form was not made for you, or has been tampered with. Start again from the job's page.")
		return
	}
	a := actionParams{Action: f.Get("action"), JobID: f.Get("job"), AttemptID: f.Get("attempt"), Outcome: f.Get("outcome"),
		Reason: strings.TrimSpace(f.Get("reason")), Actor: p.Actor, Role: p.Role.String()}
	if err := checkAction(a, h); err != nil {
		h.fail(w, r, p, http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case a.Reason == "":
		h.fail(w, r, p, http.StatusBadRequest, "Give a reason: it is recorded with the action.")
		return
	case len(a.Reason) > maxReason:
		h.fail(w, r, p, http.StatusBadRequest, fmt.Sprintf("The reason is longer than %d bytes.", maxReason))
		return
	}
	if a.Action == actionResolve && a.Outcome == string(jobs.AttemptSucceeded) {
		res := strings.TrimSpace(f.Get("result"))
		if !json.Valid([]byte(res)) {
			h.fail(w, r, p, http.StatusBadRequest, "The result must be the provider's result, as JSON.")
			return
		}
		a.Result = json.RawMessage(res)
	}
	j, _, err := h.target(r.Context(), a, p)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	params, err := json.Marshal(a)
	if err != nil {
		h.failErr(w, r, p, err)
		return
	}
	m := h.o.Manager
	rec, _, err := m.Submit(r.Context(), jobs.SubmitRequest{Owner: actionOwner(j.ID), Key: key, Kind: "console." + a.Action,
		Provider: "console", Params: params})
	switch {
	case errors.Is(err, jobs.ErrKeyConflict):
		h.fail(w, r, p, http.StatusConflict, "This form was already sent with other values. Start again from the job's page.")
		return
	case err != nil:
		h.failErr(w, r, p, err)
		return
	}
	// Once begun, an action runs to its end even if the browser goes away
	// (a double click abandons the first request): its outcome is what the
	// next request of the same form shows.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), actionTimeout)
	defer cancel()
	if err := h.execute(ctx, rec, a, j); err != nil {
		h.failErr(w, r, p, err)
		return
	}
	http.Redirect(w, r, h.path("/jobs/"+url.PathEscape(j.ID)+"?action="+url.QueryEscape(rec.ID)), http.StatusSeeOther)
}

// execute carries out the action recorded as rec, unless it was carried
// out already or is being carried out: the record's single attempt is the
// lock. A refused action's record fails with the refusal.
func (h *Handler) execute(ctx context.Context, rec jobs.Job, a actionParams, j jobs.Job) error {
	if rec.State.Terminal() {
		return nil
	}
	m := h.o.Manager
	at, err := m.StartAttempt(ctx, rec.ID, "")
	switch {
	case errors.Is(err, jobs.ErrAttemptInFlight):
		// The same form, sent again while the first is at work: wait a
		// little for it, so that the page shows its outcome.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := m.Wait(wctx, rec.ID); err != nil && wctx.Err() == nil {
			return err
		}
		return nil
	case errors.Is(err, jobs.ErrJobClosed):
		return nil
	case err != nil:
		return err
	}
	outcome, err := h.apply(ctx, a)
	var no *refusal
	switch {
	case errors.As(err, &no):
		if _, err := m.Fail(ctx, at.ID, no.msg); err != nil {
			return err
		}
		if _, err := m.FailJob(ctx, rec.ID, refusedPrefix+no.msg); err != nil {
			return err
		}
		outcome = refusedPrefix + no.msg
	case err != nil:
		// What came of it is unknown: the record stays in doubt, and
		// shows so, until someone looks.
		if _, uerr := m.MarkUnknown(context.WithoutCancel(ctx), at.ID, jobs.SanitizeReason(err.Error())); uerr != nil {
			h.log.ErrorContext(ctx, "console: record an action's failure", "action", rec.ID, "error", uerr)
		}
		return err
	default:
		res, _ := json.Marshal(actionResult{Outcome: outcome})
		if _, err := m.Complete(ctx, at.ID, res); err != nil {
			return err
		}
	}
	m.Emit(ctx, jobs.Event{Type: EventOperatorAction, JobID: j.ID, AttemptID: a.AttemptID, Owner: j.Owner, Kind: j.Kind,
		Provider: j.Provider, Reason: jobs.SanitizeReason(fmt.Sprintf("%s (%s): %s: %s -> %s", a.Actor, a.Role, a.title(), a.Reason, outcome))})
	h.log.InfoContext(ctx, "console: operator action", "actor", a.Actor, "action", a.Action, "job_id", j.ID,
		"attempt_id", a.AttemptID, "reason", a.Reason, "outcome", outcome)
	return nil
}

// apply makes the change a asks for, after checking that the state still
// allows it, and says what came of it. A *refusal means nothing changed.
func (h *Handler) apply(ctx context.Context, a actionParams) (string, error) {
	m := h.o.Manager
	j, at, err := h.target(ctx, a, Principal{})
	if err != nil {
		return "", err
	}
	if err := allowed(a, j, at); err != nil {
		return "", err
	}
	why := jobs.SanitizeReason("operator " + a.Actor + ": " + a.Reason)
	n := at.Seq
	switch a.Action {
	case actionCancelJob:
		_, err := m.CancelJob(ctx, j.ID, why)
		var closed *jobs.JobClosedError
		if errors.As(err, &closed) {
			return "", refuse("The job is already %s: it cannot be cancelled, and nothing was changed.", closed.State)
		}
		if err != nil {
			return "", err
		}
		return "the job is cancelled; attempts still in doubt keep their state, for the truth to be recorded", nil
	case actionLookup:
		rep, err := h.o.Reconciler.ReconcileAttempt(ctx, at.ID)
		if errors.Is(err, jobs.ErrInvalidTransition) {
			return "", refuse("Attempt %d is no longer in doubt: there is nothing to look up.", n)
		}
		if err != nil {
			return "", err
		}
		switch {
		case rep.Claimed > 0:
			return "", refuse("A reconciler holds attempt %d (it is examining it, or waiting to ask again); try again shortly.", n)
		case len(rep.Resolved) > 0:
			r := rep.Resolved[0]
			return fmt.Sprintf("the provider answered: attempt %d is now %s (%s)", n, r.To, r.Reason), nil
		case rep.Pending > 0:
			return fmt.Sprintf("the provider answered: attempt %d is still pending", n), nil
		case len(rep.NeedsOperator) > 0:
			return fmt.Sprintf("the provider cannot look attempt %d up: resolve it with evidence", n), nil
		case len(rep.Errors) > 0:
			return "the lookup failed: " + errorText(rep.Errors[0]), nil
		}
		return "looked up; nothing changed", nil
	}
	// Resolve.
	switch jobs.AttemptState(a.Outcome) {
	case jobs.AttemptSucceeded:
		if c, ok := m.Contract(j.Kind); ok && c.Validate != nil {
			if err := c.Validate(a.Result); err != nil {
				return "", refuse("The result breaks the contract of kind %s (version %s): %s. Nothing was changed.", j.Kind, c.Version, errorText(err))
			}
		}
		_, err := m.Complete(ctx, at.ID, a.Result)
		var lost *jobs.LostRaceError
		switch {
		case err == nil:
			return fmt.Sprintf("attempt %d succeeded: its result is the job's", n), nil
		case errors.As(err, &lost):
			return fmt.Sprintf("attempt %d is recorded as lost: attempt %s had already won, and this result was dropped", n, lost.WinnerID), nil
		case errors.Is(err, jobs.ErrJobClosed):
			return fmt.Sprintf("attempt %d is recorded as having delivered after the job was closed: the result was dropped", n), nil
		case errors.Is(err, jobs.ErrInvalidTransition):
			return "", refuse("Attempt %d was resolved meanwhile: nothing was changed.", n)
		case errors.Is(err, jobs.ErrInvalidInput):
			return "", refuse("The result cannot be used: %s. Nothing was changed.", errorText(err))
		}
		return "", err
	case jobs.AttemptFailed:
		_, err = m.Fail(ctx, at.ID, why)
	default:
		_, err = m.Cancel(ctx, at.ID, why)
	}
	if errors.Is(err, jobs.ErrInvalidTransition) {
		return "", refuse("Attempt %d was resolved meanwhile: nothing was changed.", n)
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("attempt %d is %s", n, a.Outcome), nil
}
