package linearcheck

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/intentjobs/jobs/history"
)

// Verdict is the outcome of a check.
type Verdict string

// Verdicts.
const (
	Linearizable    Verdict = "linearizable"
	NotLinearizable Verdict = "not linearizable"
	Unknown         Verdict = "unknown" // some partition could not be decided in time
)

// Result is the outcome of checking one history.
type Result struct {
	Dir     string
	Verdict Verdict

	Ops        int // operations in the history
	Ambiguous  int // of which ambiguous: an ambiguous error, no return, or CreateJobTx
	Unreturned int // of which never returned
	// Patched counts the ambiguous operations given a return time because
	// a later answer shows what they created (see returnBounds).
	Patched int
	Checked int // operations placed by the checker, over all partitions (a purge counts once in each)
	// Skipped counts the operations left out of the check, by why.
	Skipped map[string]int

	Partitions       int
	LargestPartition int           // operations in the largest partition
	Slowest          time.Duration // the longest check of one partition
	Duration         time.Duration // the whole check

	// Violations has one entry per partition that is not linearizable,
	// the smallest first; the first three are traced.
	Violations []Violation
	// Undecided lists the partitions that could not be decided, and why.
	Undecided []string

	model porcupine.Model
	info  *porcupine.LinearizationInfo // of the partitions in Violations, in their order
	all   []porcupine.Operation        // for Visualize of a history without violation
}

// Violation is one partition that is not linearizable.
type Violation struct {
	Partition string       // its owner and key
	Ops       []history.Op // its operations, in call order
	// Trace says it in words: the operations with what they asked and
	// were told, the longest prefix of them that the specification can
	// order, the state it leads to, and why no operation can come next.
	Trace string
}

// Ok reports whether the history is linearizable.
func (r Result) Ok() bool { return r.Verdict == Linearizable }

// Summary returns one line about the check: its verdict and figures.
func (r Result) Summary() string {
	s := fmt.Sprintf("%s: %s: %d operations (%d ambiguous, %d of them patched, %d never returned), %d placed in %d partitions (largest %d), checked in %v (slowest partition %v)",
		r.Dir, r.Verdict, r.Ops, r.Ambiguous, r.Patched, r.Unreturned, r.Checked, r.Partitions, r.LargestPartition,
		r.Duration.Round(time.Millisecond), r.Slowest.Round(time.Millisecond))
	if len(r.Skipped) > 0 {
		var skipped []string
		for _, why := range slices.Sorted(maps.Keys(r.Skipped)) {
			skipped = append(skipped, fmt.Sprintf("%d %s", r.Skipped[why], why))
		}
		s += "; left out: " + strings.Join(skipped, ", ")
	}
	return s
}

// Report returns the summary, then the trace of each violation and the
// partitions left undecided.
func (r Result) Report() string {
	var b strings.Builder
	b.WriteString(r.Summary())
	b.WriteString("\n")
	for _, v := range r.Violations {
		b.WriteString("\n")
		b.WriteString(v.Trace)
	}
	for _, u := range r.Undecided {
		fmt.Fprintf(&b, "\nundecided: %s\n", u)
	}
	return b.String()
}

// Visualize writes porcupine's HTML visualization: of the traced
// partitions that are not linearizable if there are any, else of the
// whole history (which
// checks it again, with the details the visualization needs).
func (r Result) Visualize(w io.Writer) error {
	info := r.info
	if info == nil {
		if len(r.all) == 0 {
			return errors.New("linearcheck: nothing to visualize")
		}
		_, li := porcupine.CheckOperationsVerbose(r.model, r.all, 0)
		info = &li
	}
	return porcupine.Visualize(r.model, *info, w)
}

// maxExplained is how many partitions that are not linearizable are
// traced, the smallest first.
const maxExplained = 3

// Options tune a check.
type Options struct {
	// Timeout bounds each of the two searches of a partition (the order
	// search, then porcupine's if it found no order); past it the
	// partition is undecided and the verdict Unknown. Zero means one
	// minute.
	Timeout time.Duration
	// Parallel is how many partitions are checked at once; zero means
	// GOMAXPROCS.
	Parallel int
}

// Check checks h with the default Options.
func Check(h *history.History) Result { return Options{}.Check(h) }

// Check checks that h is linearizable with respect to the sequential
// specification of the Store contract (see the package documentation).
func (o Options) Check(h *history.History) Result {
	start := time.Now()
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	parallel := o.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	p := partition(h)
	r := Result{Dir: h.Dir, Ops: len(h.Ops), Skipped: p.skipped, Partitions: len(p.names), Patched: len(p.bounds), model: toModel()}
	for i := range h.Ops {
		if ambiguousOp(&h.Ops[i]) {
			r.Ambiguous++
		}
		if !h.Ops[i].Returned {
			r.Unreturned++
		}
	}
	single := r.model
	single.Partition = nil

	type checked struct {
		ops     []porcupine.Operation
		verdict porcupine.CheckResult
		took    time.Duration
	}
	results := make([]checked, len(p.names))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(parallel, max(len(p.names), 1)) {
		wg.Go(func() {
			for i := range next {
				ops := p.operations(p.names[i])
				t0 := time.Now()
				// An order found by witness is checked, and decides;
				// porcupine decides the rest, and explains violations.
				verdict := porcupine.Ok
				if !witness(ops, t0.Add(timeout)) {
					verdict = porcupine.CheckOperationsTimeout(single, ops, timeout)
				}
				results[i] = checked{ops, verdict, time.Since(t0)}
			}
		})
	}
	for i := range p.names {
		next <- i
	}
	close(next)
	wg.Wait()

	var failing []int
	for i, res := range results {
		name := p.names[i]
		r.Checked += len(res.ops)
		r.LargestPartition = max(r.LargestPartition, len(res.ops))
		r.Slowest = max(r.Slowest, res.took)
		r.all = append(r.all, res.ops...)
		switch res.verdict {
		case porcupine.Illegal:
			if slices.ContainsFunc(p.calls[name], func(c *call) bool { return c.overflow.Load() }) {
				r.Undecided = append(r.Undecided, fmt.Sprintf("%s: not linearizable with the purges limited to the oldest of more than %d purgeable jobs; the contract allows other subsets", name, maxPurgeable))
			} else {
				failing = append(failing, i)
			}
		case porcupine.Unknown:
			r.Undecided = append(r.Undecided, fmt.Sprintf("%s: %d operations not decided within %v", name, len(res.ops), timeout))
		}
	}
	if len(failing) > 0 {
		// The details of the smallest failing partitions, for the traces
		// and the visualization: their longest linearizable prefixes,
		// which cost another search each.
		slices.SortStableFunc(failing, func(a, b int) int { return len(results[a].ops) - len(results[b].ops) })
		explained := failing[:min(len(failing), maxExplained)]
		var ops []porcupine.Operation
		for _, i := range explained {
			ops = append(ops, results[i].ops...)
		}
		_, info := porcupine.CheckOperationsVerbose(r.model, ops, timeout*time.Duration(len(explained)))
		r.info = &info
		partials := info.PartialLinearizationsOperations()
		for k, i := range failing {
			name := p.names[i]
			v := Violation{Partition: name}
			for _, c := range p.calls[name] {
				v.Ops = append(v.Ops, *c.op)
			}
			if k < len(explained) {
				var longest []porcupine.Operation
				if k < len(partials) {
					for _, l := range partials[k] {
						if len(l) > len(longest) {
							longest = l
						}
					}
				}
				v.Trace = trace(name, p.calls[name], p.bounds, longest)
			} else {
				v.Trace = fmt.Sprintf("NOT LINEARIZABLE: %s: %d operations (not traced: the %d smallest partitions that are not linearizable are)\n",
					name, len(v.Ops), maxExplained)
			}
			r.Violations = append(r.Violations, v)
		}
	}
	switch {
	case len(r.Violations) > 0:
		r.Verdict = NotLinearizable
	case len(r.Undecided) > 0:
		r.Verdict = Unknown
	default:
		r.Verdict = Linearizable
	}
	r.Duration = time.Since(start)
	return r
}

// trace renders a violation: the partition's calls, the longest prefix the
// specification can order, the states it leads to, and what each call
// that could come next was told against what the specification says.
func trace(name string, calls []*call, bounds map[int]int64, longest []porcupine.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NOT LINEARIZABLE: %s: %d operations\n", name, len(calls))
	t0 := calls[0].op.Call
	for _, c := range calls {
		t0 = min(t0, c.op.Call)
	}
	ms := func(t int64) string { return fmt.Sprintf("%9.3f", float64(t-t0)/1e6) }
	number := map[*call]int{}
	b.WriteString("operations in call order (ms from the first call; ∞: ambiguous, may take effect any time after its call; ≤: ambiguous, shown to have taken effect by then):\n")
	for i, c := range calls {
		number[c] = i + 1
		ret := "        ∞"
		if b, ok := bounds[c.index]; ok && c.ambiguous {
			ret = "≤" + ms(b)
		} else if !c.ambiguous {
			ret = ms(c.op.Return)
		}
		fmt.Fprintf(&b, "  #%-3d [%s, %s] %-14s %s\n", i+1, ms(c.op.Call), ret, c.op.Client, describeCall(c, same))
	}
	// Replay the longest prefix.
	states := []*state{emptyState}
	var order []string
	done := map[*call]bool{}
	for _, op := range longest {
		c := op.Input.(*call)
		done[c] = true
		order = append(order, fmt.Sprintf("#%d", number[c]))
		states = stepAll(states, c)
	}
	if len(order) == 0 {
		b.WriteString("no operation can come first.\n")
	} else {
		fmt.Fprintf(&b, "longest linearizable prefix: %s\n", strings.Join(order, " "))
	}
	for _, s := range states {
		fmt.Fprintf(&b, "  state after it: %s\n", s.describe(same))
	}
	// The calls that could come next: not yet ordered, and called before
	// any of those returned.
	var rest []*call
	first := int64(math.MaxInt64)
	for _, c := range calls {
		if !done[c] {
			rest = append(rest, c)
			if !c.ambiguous {
				first = min(first, c.op.Return)
			}
		}
	}
	b.WriteString("no operation can come next:\n")
	for _, c := range rest {
		if c.op.Call > first {
			continue
		}
		if c.ambiguous {
			fmt.Fprintf(&b, "  #%d is ambiguous: it fits any state, taking effect or not\n", number[c])
			continue
		}
		fmt.Fprintf(&b, "  #%d %s\n", number[c], describeCall(c, same))
		for _, s := range states {
			for _, o := range spec(s, c) {
				fmt.Fprintf(&b, "      the contract says: %s\n", describeWant(&o.want, same))
				if d := o.want.mismatch(c); d != "" {
					fmt.Fprintf(&b, "        but %s\n", d)
				}
			}
		}
	}
	return aliasIDs(b.String())
}

// stepAll returns the states that c leads to from any of states.
func stepAll(states []*state, c *call) []*state {
	var out []*state
	for _, s := range states {
		for _, n := range step(s, c, c) {
			n := n.(*state)
			if !slices.ContainsFunc(out, func(o *state) bool { return o.key == n.key }) {
				out = append(out, n)
			}
		}
	}
	return out
}

func same(id string) string { return id }

var idPattern = regexp.MustCompile(`\b(job|att|clm)_[0-9A-Za-z]+\b`)

// aliasIDs replaces the IDs in a trace by short names (J1, A1, C1 for
// jobs, attempts and claims, in order of appearance), and adds a legend.
func aliasIDs(text string) string {
	names := map[string]string{}
	count := map[string]int{}
	var legend []string
	out := idPattern.ReplaceAllStringFunc(text, func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		letter := map[string]string{"job": "J", "att": "A", "clm": "C"}[id[:3]]
		count[letter]++
		n := fmt.Sprintf("%s%d", letter, count[letter])
		names[id] = n
		legend = append(legend, n+" = "+id)
		return n
	})
	first, rest, _ := strings.Cut(out, "\n")
	return first + "\nIDs: " + strings.Join(legend, ", ") + "\n" + rest
}
