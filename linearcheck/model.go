package linearcheck

import (
	"github.com/anishathalye/porcupine"
)

// Model returns the sequential specification of a jobs.Store as a
// porcupine model, for histories of this package's operations (Check
// builds them). Its states are those of one partition, an owner and key:
// Check runs it on each partition apart.
//
// It is nondeterministic: an ambiguous operation goes both ways, having
// taken effect or not, and a purge may have deleted any subset of the
// jobs it could delete.
func Model() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Partition: byPartition,
		Init:      func() []any { return []any{emptyState} },
		Step:      step,
		Equal:     func(a, b any) bool { return a.(*state).key == b.(*state).key },
		Hash:      func(s any) uint64 { return s.(*state).hash },
		DescribeOperation: func(in, _ any) string {
			return describeCall(in.(*call), shortID)
		},
		DescribeState: func(s any) string { return s.(*state).describe(shortID) },
	}
}

// toModel returns Model as a porcupine.Model.
func toModel() porcupine.Model {
	nm := Model()
	return nm.ToModel()
}

// step returns the states the call may lead to from st: for an ambiguous
// call, st itself and every state the specification allows, whatever the
// answer; otherwise, the states of the ways whose answer is the one
// recorded (none if no way is: the call cannot come next).
func step(st, in, _ any) []any {
	s, c := st.(*state), in.(*call)
	outs := spec(s, c)
	var next []any
	if c.ambiguous {
		next = append(next, s)
		for _, o := range outs {
			next = append(next, o.next)
		}
		return next
	}
	for _, o := range outs {
		if o.want.matches(c) {
			next = append(next, o.next)
		}
	}
	return next
}

// byPartition groups operations by their partition, in the order of the
// partitions' first operations.
func byPartition(ops []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range ops {
		name := op.Input.(*call).partition
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// shortID shortens an ID for the visualization: its prefix and last six
// characters.
func shortID(id string) string {
	if len(id) > 14 && id[3] == '_' {
		return id[:4] + "…" + id[len(id)-6:]
	}
	return id
}
