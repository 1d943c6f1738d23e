package linearcheck

import (
	"math/big"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// witness searches for an order of ops (one partition's) that explains
// every answer, and returns whether it found one within the deadline.
// Check runs it before porcupine on each partition: a partition for which
// it finds an order is linearizable; one for which it does not, porcupine
// decides (and traces). It cannot make a history pass that porcupine
// would fail: the order it finds is checked again, call by call, against
// real time and the specification (validWitness) before it is believed.
//
// The search is porcupine's (Wing and Gong's, with a cache of the sets of
// calls placed and the state they lead to), with one rule more, which
// removes the part of the search that grows exponentially when many calls
// overlap without changing the state, as hundreds of reads and repeated
// submits do while a failover stalls them all: a call that may come next
// and, in the current state, leaves the state as it is with the answer
// recorded (a read, a refusal, a submit that finds the key's job) is
// placed at once, and the search never tries it later. If an order places
// it later, placing it now instead is also an order: every call that must
// precede it is already placed (it may come next), it changes no state,
// so every call after it gets the same state, and a call placed earlier
// only loosens what real time asks of the others.
func witness(ops []porcupine.Operation, deadline time.Time) bool {
	n := len(ops)
	if n == 0 {
		return true
	}
	type frame struct {
		state *state
		op    int
	}
	placed := new(big.Int)
	seen := map[string]bool{}
	var order []frame
	visits := 0
	var dfs func(s *state) bool
	dfs = func(s *state) bool {
		if len(order) == n {
			return true
		}
		visits++
		if visits%1024 == 0 && time.Now().After(deadline) {
			return false
		}
		memo := placed.Text(62) + "|" + s.key
		if seen[memo] {
			return false
		}
		seen[memo] = true
		// The calls that may come next: not placed, and called no later
		// than the earliest return of the calls not placed.
		first := int64(1<<63 - 1)
		for i := range n {
			if placed.Bit(i) == 0 {
				first = min(first, ops[i].Return)
			}
		}
		var next []int
		for i := range n {
			if placed.Bit(i) == 0 && ops[i].Call <= first {
				next = append(next, i)
			}
		}
		for _, i := range next {
			c := ops[i].Input.(*call)
			outs := step(s, c, c)
			if len(outs) > 0 && !c.ambiguous && !slices.ContainsFunc(outs, func(o any) bool { return o.(*state).key != s.key }) {
				placed.SetBit(placed, i, 1)
				order = append(order, frame{s, i})
				if dfs(s) {
					return true
				}
				order = order[:len(order)-1]
				placed.SetBit(placed, i, 0)
				return false
			}
		}
		for _, i := range next {
			c := ops[i].Input.(*call)
			for _, o := range step(s, c, c) {
				ns := o.(*state)
				placed.SetBit(placed, i, 1)
				order = append(order, frame{ns, i})
				if dfs(ns) {
					return true
				}
				order = order[:len(order)-1]
				placed.SetBit(placed, i, 0)
			}
		}
		return false
	}
	if !dfs(emptyState) {
		return false
	}
	seq := make([]int, n)
	states := make([]*state, n)
	for k, f := range order {
		seq[k], states[k] = f.op, f.state
	}
	return validWitness(ops, seq, states)
}

// validWitness checks an order found by witness: each call once; no call
// placed before one that returned before it was called; and each step,
// from the state before it, one the specification allows for the call
// with its recorded answer (any way, for an ambiguous call), leading to
// the state recorded.
func validWitness(ops []porcupine.Operation, seq []int, states []*state) bool {
	if len(seq) != len(ops) {
		return false
	}
	seen := make([]bool, len(ops))
	for _, i := range seq {
		if seen[i] {
			return false
		}
		seen[i] = true
	}
	for a := range seq {
		for b := a + 1; b < len(seq); b++ {
			if ops[seq[b]].Return < ops[seq[a]].Call {
				return false
			}
		}
	}
	s := emptyState
	for k, i := range seq {
		c := ops[i].Input.(*call)
		if !slices.ContainsFunc(step(s, c, c), func(o any) bool { return o.(*state).key == states[k].key }) {
			return false
		}
		s = states[k]
	}
	return true
}
