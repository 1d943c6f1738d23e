package linearcheck

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/intentjobs/jobs"
)

// state is what the store holds for one partition, one owner and key:
// every job created under them and not purged, in creation order, with its
// attempts. A state is never changed once sealed: a step builds a new one.
type state struct {
	jobs []job
	key  string // every field, for Equal
	hash uint64
}

// job is a stored job. Times are Unix nanoseconds from the calls' inputs
// (noTime for none); the model uses them only where the contract does:
// which jobs a purge may delete.
type job struct {
	ID, Owner, Key, Kind, Provider, Fingerprint string
	Params                                      string // normalized JSON
	State                                       jobs.JobState
	Version                                     int64
	Result                                      string // normalized JSON; empty for none
	CompletedBy, Reason, ReplacedBy             string
	CreatedAt, ClosedAt                         int64
	Attempts                                    []attempt // in Seq order
}

// attempt is a stored attempt, with a reconciler's claim on it.
type attempt struct {
	ID, Provider, ProviderRef, Reason string
	State                             jobs.AttemptState
	Seq                               int
	BaseVersion                       int64
	Hedge                             bool
	UpdatedAt                         int64
	ClaimToken                        string
	ClaimedUntil                      int64
}

// noTime stands for the zero time.Time: before every other time.
const noTime = math.MinInt64

// nanos returns t in Unix nanoseconds, or noTime for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return noTime
	}
	return t.UnixNano()
}

var emptyState = (&state{}).seal()

// seal computes the state's key and hash, and returns it.
func (s *state) seal() *state {
	b := make([]byte, 0, 256*len(s.jobs))
	str := func(v string) { b = strconv.AppendQuote(b, v) }
	num := func(v int64) { b = strconv.AppendInt(append(b, ' '), v, 10) }
	for _, j := range s.jobs {
		b = append(b, 'J')
		for _, v := range [...]string{j.ID, j.Owner, j.Key, j.Kind, j.Provider, j.Fingerprint, j.Params, string(j.State),
			j.Result, j.CompletedBy, j.Reason, j.ReplacedBy} {
			str(v)
		}
		num(j.Version)
		num(j.CreatedAt)
		num(j.ClosedAt)
		for _, a := range j.Attempts {
			b = append(b, "\n A"...)
			for _, v := range [...]string{a.ID, a.Provider, a.ProviderRef, a.Reason, string(a.State), a.ClaimToken} {
				str(v)
			}
			num(int64(a.Seq))
			num(a.BaseVersion)
			b = strconv.AppendBool(append(b, ' '), a.Hedge)
			num(a.UpdatedAt)
			num(a.ClaimedUntil)
		}
		b = append(b, '\n')
	}
	s.key = string(b)
	h := fnv.New64a()
	h.Write(b)
	s.hash = h.Sum64()
	return s
}

// with returns a new state in which the job at index i is what change
// makes of a copy of it (its attempts copied too).
func (s *state) with(i int, change func(j *job)) *state {
	out := &state{jobs: slices.Clone(s.jobs)}
	j := out.jobs[i]
	j.Attempts = slices.Clone(j.Attempts)
	change(&j)
	out.jobs[i] = j
	return out.seal()
}

// adding returns a new state with j appended.
func (s *state) adding(j job) *state {
	out := &state{jobs: append(slices.Clone(s.jobs), j)}
	return out.seal()
}

// without returns a new state without the jobs whose indexes are in drop.
func (s *state) without(drop []int) *state {
	out := &state{}
	for i, j := range s.jobs {
		if !slices.Contains(drop, i) {
			out.jobs = append(out.jobs, j)
		}
	}
	return out.seal()
}

// jobIndex returns the index of the job id, or -1.
func (s *state) jobIndex(id string) int {
	return slices.IndexFunc(s.jobs, func(j job) bool { return j.ID == id })
}

// attemptIndex returns the indexes of the attempt id and its job, or -1s.
func (s *state) attemptIndex(id string) (int, int) {
	for ji, j := range s.jobs {
		for ai, a := range j.Attempts {
			if a.ID == id {
				return ji, ai
			}
		}
	}
	return -1, -1
}

// holder returns the index of the job that holds the partition's key (not
// retired), or -1.
func (s *state) holder() int {
	return slices.IndexFunc(s.jobs, func(j job) bool { return j.ReplacedBy == "" })
}

// retired returns the index of the job whose key the job by took over, or
// -1.
func (s *state) retired(by string) int {
	return slices.IndexFunc(s.jobs, func(j job) bool { return j.ReplacedBy == by })
}

// view returns the job as a store returns it, without its times.
func (j *job) view() jobs.Job {
	v := jobs.Job{ID: j.ID, Owner: j.Owner, Key: j.Key, Kind: j.Kind, Provider: j.Provider, Params: json.RawMessage(j.Params),
		Fingerprint: j.Fingerprint, State: j.State, Version: j.Version, Attempts: len(j.Attempts),
		CompletedBy: j.CompletedBy, Reason: j.Reason, ReplacedBy: j.ReplacedBy}
	if j.Result != "" {
		v.Result = json.RawMessage(j.Result)
	}
	return v
}

// view returns the attempt as a store returns it, without its times.
func (a *attempt) view(jobID string) jobs.Attempt {
	return jobs.Attempt{ID: a.ID, JobID: jobID, Seq: a.Seq, Provider: a.Provider, State: a.State,
		BaseVersion: a.BaseVersion, Hedge: a.Hedge, ProviderRef: a.ProviderRef, Reason: a.Reason}
}

// normJSON returns raw in a canonical form (members sorted, no
// insignificant space, numbers as written), for comparing results and
// params as values: empty for nothing, raw itself if it is not JSON.
func normJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return string(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

// tri is what a comparison of times may answer in some store: true,
// false, or either.
type tri uint8

const (
	canTrue tri = 1 << iota
	canFalse
	either = canTrue | canFalse
)

// truth returns the tri of a known answer.
func truth(b bool) tri {
	if b {
		return canTrue
	}
	return canFalse
}

// and is the conjunction: true when both can be, false when either can be.
func (t tri) and(u tri) tri {
	var out tri
	if t&canTrue != 0 && u&canTrue != 0 {
		out |= canTrue
	}
	if t&canFalse != 0 || u&canFalse != 0 {
		out |= canFalse
	}
	return out
}

func (t tri) not() tri {
	var out tri
	if t&canTrue != 0 {
		out |= canFalse
	}
	if t&canFalse != 0 {
		out |= canTrue
	}
	return out
}

// Stores keep times to the nanosecond (memstore) or to the microsecond
// (the SQL stores, which truncate), and compare what they keep: where the
// two precisions disagree, either answer is the contract's.
func micros(t int64) int64 {
	if t == noTime {
		return noTime
	}
	if t < 0 && t%1000 != 0 {
		return t/1000 - 1
	}
	return t / 1000
}

func timeBefore(t, u int64) tri { return truth(t < u) | truth(micros(t) < micros(u)) }
func timeEqual(t, u int64) tri  { return truth(t == u) | truth(micros(t) == micros(u)) }

// describe returns a short account of the state, for traces.
func (s *state) describe(alias func(string) string) string {
	if len(s.jobs) == 0 {
		return "(no job)"
	}
	var parts []string
	for _, j := range s.jobs {
		p := alias(j.ID) + " " + string(j.State) + " v" + strconv.FormatInt(j.Version, 10)
		if j.CompletedBy != "" {
			p += " won by " + alias(j.CompletedBy)
		}
		if j.ReplacedBy != "" {
			p += " key retired for " + alias(j.ReplacedBy)
		}
		var as []string
		for _, a := range j.Attempts {
			d := alias(a.ID) + " " + string(a.State)
			if a.ClaimToken != "" {
				d += " claimed"
			}
			as = append(as, d)
		}
		if len(as) > 0 {
			p += " [" + strings.Join(as, ", ") + "]"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
