package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/failover"
)

// Inspector answers operators' questions about the jobs of one Manager's
// store. It is safe for concurrent use.
type Inspector struct {
	m     *jobs.Manager
	store jobs.Store
}

// New returns an Inspector over m's store.
func New(m *jobs.Manager) *Inspector { return &Inspector{m: m, store: m.Store()} }

// Manager returns the Manager the Inspector reads through.
func (in *Inspector) Manager() *jobs.Manager { return in.m }

// unsupported is the error of a question the store cannot answer.
func unsupported(what string, s jobs.Store, capability string) error {
	return fmt.Errorf("inspect: %s needs a store that is a jobs.%s; a %T is not: %w", what, capability, s, errors.ErrUnsupported)
}

// Page is one page of jobs.
type Page struct {
	Jobs []jobs.Job
	// Next is the After of the page that follows, or "" if this is the
	// last.
	Next string
}

// List returns the page of jobs f selects, newest first unless f.Oldest.
// Errors: jobs.ErrInvalidInput (f.Check), jobs.ErrStorage; one matching
// errors.ErrUnsupported if the store is not a jobs.JobLister.
func (in *Inspector) List(ctx context.Context, f Filter) (Page, error) {
	if err := f.Check(); err != nil {
		return Page{}, err
	}
	lister, ok := in.store.(jobs.JobLister)
	if !ok {
		return Page{}, unsupported("listing jobs", in.store, "JobLister")
	}
	js, err := lister.ListJobs(ctx, f.Query(in.m.Now()))
	if err != nil {
		return Page{}, err
	}
	var p Page
	if n := f.limit(); len(js) > n {
		js = js[:n]
		p.Next = js[n-1].ID
	}
	p.Jobs = js
	return p, nil
}

// countPage is how many jobs a count reads per page where the store cannot
// count (no jobs.JobCounter).
const countPage = 1000

// Count counts the jobs f selects (its page fields aside): with the
// store's count where it is a jobs.JobCounter, else by reading every page.
// Errors: as List.
func (in *Inspector) Count(ctx context.Context, f Filter) (int64, error) {
	if err := f.Check(); err != nil {
		return 0, err
	}
	q := f.Query(in.m.Now())
	if c, ok := in.store.(jobs.JobCounter); ok {
		return c.CountJobs(ctx, q)
	}
	lister, ok := in.store.(jobs.JobLister)
	if !ok {
		return 0, unsupported("counting jobs", in.store, "JobLister")
	}
	q.After, q.Limit, q.Newest = "", countPage, false
	var n int64
	for {
		js, err := lister.ListJobs(ctx, q)
		if err != nil {
			return 0, err
		}
		n += int64(len(js))
		if len(js) < countPage {
			return n, nil
		}
		q.After = js[len(js)-1].ID
	}
}

// Found is what Find found.
type Found struct {
	Jobs     []jobs.Job     // the jobs found, newest first
	Attempts []jobs.Attempt // the attempts that matched (by ID or provider reference)
}

// Find finds what q names: a job ID (job_…), an attempt ID (att_…), or a
// provider's reference for a request (where the store is a
// jobs.AttemptLister). Nothing found is no error: Found is empty. Use
// FindByKey for an owner and key.
func (in *Inspector) Find(ctx context.Context, q string) (Found, error) {
	q = strings.TrimSpace(q)
	var f Found
	if q == "" {
		return f, nil
	}
	if strings.HasPrefix(q, "job_") {
		j, err := in.m.Get(ctx, q)
		switch {
		case err == nil:
			f.Jobs = append(f.Jobs, j)
			return f, nil
		case !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrInvalidInput):
			return f, err
		}
	}
	if strings.HasPrefix(q, "att_") {
		a, err := in.m.Attempt(ctx, q)
		switch {
		case err == nil:
			j, err := in.m.Get(ctx, a.JobID)
			if err != nil {
				return f, err
			}
			f.Attempts, f.Jobs = append(f.Attempts, a), append(f.Jobs, j)
			return f, nil
		case !errors.Is(err, jobs.ErrNotFound) && !errors.Is(err, jobs.ErrInvalidInput):
			return f, err
		}
	}
	al, ok := in.store.(jobs.AttemptLister)
	if !ok {
		return f, nil
	}
	as, err := al.ListAttempts(ctx, jobs.AttemptQuery{ProviderRef: q, Newest: true, Limit: 50})
	if err != nil {
		return f, err
	}
	seen := map[string]bool{}
	for _, a := range as {
		f.Attempts = append(f.Attempts, a)
		if seen[a.JobID] {
			continue
		}
		seen[a.JobID] = true
		j, err := in.m.Get(ctx, a.JobID)
		if errors.Is(err, jobs.ErrNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			return f, err
		}
		f.Jobs = append(f.Jobs, j)
	}
	return f, nil
}

// FindByKey returns the job bound to owner and key, or jobs.ErrNotFound.
func (in *Inspector) FindByKey(ctx context.Context, owner, key string) (jobs.Job, error) {
	return in.m.GetByKey(ctx, owner, key)
}

// Story is everything known of one job.
type Story struct {
	Job      jobs.Job
	Attempts []jobs.Attempt
	// Reconcile holds, by attempt ID, each attempt's last lookup and the
	// reconciler's claim, where the store keeps them (jobs.LookupStore).
	Reconcile map[string]jobs.ReconcileState
	// Chain lists the jobs that held the job's owner and key, oldest
	// first, this one among them: the jobs it replaced under a key reuse
	// policy, and the one that replaced it.
	Chain []jobs.Job
}

// maxChain bounds how far Story follows a key's chain each way.
const maxChain = 20

// Story reads the job jobID, its attempts, their lookups and its key's
// chain. Errors: jobs.ErrNotFound, jobs.ErrInvalidInput, jobs.ErrStorage.
func (in *Inspector) Story(ctx context.Context, jobID string) (Story, error) {
	j, err := in.m.Get(ctx, jobID)
	if err != nil {
		return Story{}, err
	}
	as, err := in.m.Attempts(ctx, jobID)
	if err != nil {
		return Story{}, err
	}
	s := Story{Job: j, Attempts: as, Reconcile: map[string]jobs.ReconcileState{}}
	if ls, ok := in.store.(jobs.LookupStore); ok && len(as) > 0 {
		ids := make([]string, len(as))
		for i, a := range as {
			ids[i] = a.ID
		}
		states, err := ls.ReconcileStates(ctx, ids)
		if err != nil {
			return Story{}, err
		}
		for _, r := range states {
			s.Reconcile[r.AttemptID] = r
		}
	}
	// Back along the chain: the jobs whose key this one took over.
	var before []jobs.Job
	for cur := j; len(before) < maxChain; {
		prev, err := in.m.Replaced(ctx, cur.ID)
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if err != nil {
			return Story{}, err
		}
		before = append(before, prev)
		cur = prev
	}
	slices.Reverse(before)
	s.Chain = append(before, j)
	// Forward: the jobs that took this one's key.
	for cur := j; cur.ReplacedBy != "" && len(s.Chain) < 2*maxChain; {
		next, err := in.m.Get(ctx, cur.ReplacedBy)
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if err != nil {
			return Story{}, err
		}
		s.Chain = append(s.Chain, next)
		cur = next
	}
	if len(s.Chain) == 1 {
		s.Chain = nil
	}
	return s, nil
}

// Doubt is an attempt in doubt (starting or unknown), with what is known
// of it.
type Doubt struct {
	Attempt   jobs.Attempt
	Job       jobs.Job
	Reconcile jobs.ReconcileState // zero where the store keeps no lookups
	Age       time.Duration       // since the attempt started
	// NeedsOperator is set when only an operator can resolve the
	// attempt: its provider's last answer was that it cannot look the
	// request up.
	NeedsOperator bool
}

// InDoubtQuery says which attempts in doubt InDoubt lists.
type InDoubtQuery struct {
	Limit int // at most this many; 0 means DefaultLimit
	// Owners, if not nil, keeps the attempts of jobs of these owners only.
	Owners []string
}

// maxInDoubt bounds how many attempts in doubt InDoubt reads to sort them.
const maxInDoubt = 1000

// InDoubt lists the attempts that are starting or unknown, the ones that
// need an operator first, then the oldest, each with its job. It reads
// them with the store's jobs.AttemptLister, or else its jobs.ClaimStore,
// at most the 1000 oldest; it reads the jobs of those it returns only.
func (in *Inspector) InDoubt(ctx context.Context, q InDoubtQuery) ([]Doubt, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	now := in.m.Now()
	var as []jobs.Attempt
	switch s := in.store.(type) {
	case jobs.AttemptLister:
		var err error
		as, err = s.ListAttempts(ctx, jobs.AttemptQuery{States: []jobs.AttemptState{jobs.AttemptStarting, jobs.AttemptUnknown}, Limit: maxInDoubt})
		if err != nil {
			return nil, err
		}
	case jobs.ClaimStore:
		all, err := s.StaleAttempts(ctx, jobs.StaleQuery{UnknownBefore: now.Add(time.Nanosecond), OpenBefore: now.Add(time.Nanosecond), Limit: maxInDoubt})
		if err != nil {
			return nil, err
		}
		for _, a := range all {
			if a.State.InDoubt() {
				as = append(as, a)
			}
		}
	default:
		return nil, unsupported("listing attempts in doubt", in.store, "AttemptLister")
	}
	states := map[string]jobs.ReconcileState{}
	if ls, ok := in.store.(jobs.LookupStore); ok && len(as) > 0 {
		ids := make([]string, len(as))
		for i, a := range as {
			ids[i] = a.ID
		}
		rs, err := ls.ReconcileStates(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			states[r.AttemptID] = r
		}
	}
	ds := make([]Doubt, len(as))
	for i, a := range as {
		r := states[a.ID]
		ds[i] = Doubt{Attempt: a, Reconcile: r, Age: now.Sub(a.CreatedAt),
			NeedsOperator: strings.HasPrefix(r.LookupAnswer, failover.AnswerUnsupported)}
	}
	slices.SortStableFunc(ds, func(x, y Doubt) int {
		if x.NeedsOperator != y.NeedsOperator {
			if x.NeedsOperator {
				return -1
			}
			return 1
		}
		return cmp.Or(x.Attempt.CreatedAt.Compare(y.Attempt.CreatedAt), strings.Compare(x.Attempt.ID, y.Attempt.ID))
	})
	out := make([]Doubt, 0, min(limit, len(ds)))
	for _, d := range ds {
		if len(out) == limit {
			break
		}
		j, err := in.m.Get(ctx, d.Attempt.JobID)
		if errors.Is(err, jobs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if q.Owners != nil && !slices.Contains(q.Owners, j.Owner) {
			continue
		}
		d.Job = j
		out = append(out, d)
	}
	return out, nil
}
