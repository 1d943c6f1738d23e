package inspect

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// Filter selects jobs, as the console's list and jobsctl's list and
// count spell it. A field left zero selects every job.
type Filter struct {
	Owner    string
	States   []jobs.JobState
	Kind     string
	Provider string
	// NewerThan keeps the jobs created less than this long ago; OlderThan
	// those created at least this long ago.
	NewerThan time.Duration
	OlderThan time.Duration

	Oldest bool   // oldest first; newest first otherwise
	After  string // the last job ID of the page before
	Limit  int    // page size; 0 means DefaultLimit
}

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// FilterError is a filter that cannot be run. It matches
// jobs.ErrInvalidInput.
type FilterError struct {
	Field   string
	Problem string
}

func (e *FilterError) Error() string { return "inspect: filter " + e.Field + ": " + e.Problem }

// Is reports whether target is jobs.ErrInvalidInput.
func (e *FilterError) Is(target error) bool { return target == jobs.ErrInvalidInput }

// Check reports a filter that cannot be run: an unknown state, a negative
// age or limit, or a limit above MaxLimit.
func (f Filter) Check() error {
	for _, s := range f.States {
		if !s.Valid() {
			return &FilterError{"state", fmt.Sprintf("%q is none of pending, running, succeeded, failed, cancelled", s)}
		}
	}
	switch {
	case f.NewerThan < 0:
		return &FilterError{"newer-than", "negative"}
	case f.OlderThan < 0:
		return &FilterError{"older-than", "negative"}
	case f.Limit < 0 || f.Limit > MaxLimit:
		return &FilterError{"limit", fmt.Sprintf("%d is not between 1 and %d", f.Limit, MaxLimit)}
	}
	return nil
}

// Query is the jobs.JobQuery of f at time now, asking for one more job
// than the page holds (to tell whether another page follows).
func (f Filter) Query(now time.Time) jobs.JobQuery {
	q := jobs.JobQuery{Owner: f.Owner, States: f.States, Kind: f.Kind, Provider: f.Provider,
		Newest: !f.Oldest, After: f.After, Limit: f.limit() + 1}
	if f.NewerThan > 0 {
		q.CreatedAfter = now.Add(-f.NewerThan)
	}
	if f.OlderThan > 0 {
		q.CreatedBefore = now.Add(-f.OlderThan)
	}
	return q
}

func (f Filter) limit() int {
	if f.Limit <= 0 {
		return DefaultLimit
	}
	return f.Limit
}

// ParseStates reads a comma-separated list of job states ("" for none).
func ParseStates(s string) ([]jobs.JobState, error) {
	var out []jobs.JobState
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		st := jobs.JobState(p)
		if !st.Valid() {
			return nil, &FilterError{"state", fmt.Sprintf("%q is none of pending, running, succeeded, failed, cancelled", p)}
		}
		out = append(out, st)
	}
	return out, nil
}

// ParseFilter reads a filter from a URL's query: owner, state (repeated or
// comma-separated), kind, provider, newer-than and older-than (Go
// durations, or days as "7d"), order=oldest, after and limit.
func ParseFilter(v url.Values) (Filter, error) {
	f := Filter{Owner: v.Get("owner"), Kind: v.Get("kind"), Provider: v.Get("provider"),
		After: v.Get("after"), Oldest: v.Get("order") == "oldest"}
	for _, s := range v["state"] {
		sts, err := ParseStates(s)
		if err != nil {
			return Filter{}, err
		}
		f.States = append(f.States, sts...)
	}
	var err error
	if f.NewerThan, err = ParseAge("newer-than", v.Get("newer-than")); err != nil {
		return Filter{}, err
	}
	if f.OlderThan, err = ParseAge("older-than", v.Get("older-than")); err != nil {
		return Filter{}, err
	}
	if s := v.Get("limit"); s != "" {
		if f.Limit, err = strconv.Atoi(s); err != nil {
			return Filter{}, &FilterError{"limit", fmt.Sprintf("%q is not a number", s)}
		}
	}
	return f, f.Check()
}

// ParseAge reads an age: a Go duration ("90m", "36h") or a number of days
// ("7d"); "" is zero.
func ParseAge(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n >= 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, &FilterError{field, fmt.Sprintf("%q is not an age such as 90m, 36h or 7d", s)}
	}
	return d, nil
}

// Values is f as a URL query, the inverse of ParseFilter (without After).
func (f Filter) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("owner", f.Owner)
	for _, s := range f.States {
		v.Add("state", string(s))
	}
	set("kind", f.Kind)
	set("provider", f.Provider)
	if f.NewerThan > 0 {
		set("newer-than", f.NewerThan.String())
	}
	if f.OlderThan > 0 {
		set("older-than", f.OlderThan.String())
	}
	if f.Oldest {
		set("order", "oldest")
	}
	if f.Limit > 0 {
		set("limit", strconv.Itoa(f.Limit))
	}
	return v
}
