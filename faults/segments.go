package faults

import (
	"cmp"
	"slices"

	"github.com/anishathalye/porcupine"
)

// minSegment is the fewest operations a segment holds before the history
// may be cut: each porcupine check has a fixed cost, and cutting at fewer
// quiet points than there are is as exact as cutting at all of them.
const minSegment = 256

// segment is a stretch of a history checked on its own, from state init.
type segment struct {
	init any
	ops  []porcupine.Operation
}

// knownState is fed a history's operations in call order and reports the
// state every legal linearization of the operations fed so far ends in,
// if the operations alone determine it (known false otherwise).
type knownState func(op porcupine.Operation) (state any, known bool)

// segments cuts hist into stretches that porcupine can check one by one,
// each from the state the stretches before it end in, with the same
// verdict as the whole history. A cut goes before an operation called
// after every earlier operation returned (strictly: porcupine orders a
// call and a return at the same time as concurrent), where the state is
// known. That is sound and exact: every operation before the cut precedes
// every one after it in real time, so every linearization of the whole is
// one of the part before followed by one of the part after; and because
// each legal linearization of the part before ends in the same known
// state, the whole is legal iff the part before is legal from its start
// and the part after is legal from that state. A cut where an operation
// is still in flight, or where the state depends on the order chosen,
// would not be: the former lets an operation move across the cut, the
// latter checks the rest from a state the history may never have had.
func segments(hist []porcupine.Operation, init any, known knownState) []segment {
	ops := slices.Clone(hist)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var out []segment
	cur := segment{init: init}
	var lastReturn int64 // the latest return in cur
	var state any        // after cur, if stateKnown
	stateKnown := false
	for _, op := range ops {
		if len(cur.ops) >= minSegment && stateKnown && lastReturn < op.Call {
			out = append(out, cur)
			cur = segment{init: state}
		}
		lastReturn = max(lastReturn, op.Return)
		cur.ops = append(cur.ops, op)
		state, stateKnown = known(op)
	}
	if len(cur.ops) > 0 {
		out = append(out, cur)
	}
	return out
}

// mutexKnown knows the mutex's state wherever as many releases as acquires
// were fed: acquires and releases then alternate in every legal order (an
// acquire needs the lock free, a release needs it held), so it is free.
func mutexKnown() knownState {
	held := 0
	return func(op porcupine.Operation) (any, bool) {
		if op.Input.(mutexInput).acquire {
			held++
		} else {
			held--
		}
		return -1, held == 0
	}
}

// fencedKnown always knows the fenced register: it holds the highest token
// accepted so far (an accepted write never lowers it: it needs a token at
// least the register's), whatever the order; reads and rejected writes
// leave it as it is.
func fencedKnown() knownState {
	var high int64
	return func(op porcupine.Operation) (any, bool) {
		if in := op.Input.(registerInput); in.write && op.Output.(bool) {
			high = max(high, in.token)
		}
		return high, true
	}
}
