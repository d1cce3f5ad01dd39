package faults

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkTimeout bounds one porcupine check of one segment of a history
// (see segments): a long history is many short checks, never one cut short.
const checkTimeout = 10 * time.Second

// Interval is one holder's belief that it held the lock: from the return of
// a successful Acquire to the first of its loss signal or its Unlock
// (EndCall is when it last saw the lease held or called Unlock, End when it
// saw the loss or Unlock returned).
type Interval struct {
	Client     string
	Token      int64
	Called     time.Duration // when its Acquire was called
	Start, End time.Duration
	EndCall    time.Duration // when the holder stopped using the lock
	Lost       bool
}

// Intervals pairs each successful Acquire of a client with the first Lost or
// Release of that client after it. A hold with neither ends at +inf.
func Intervals(ops []Op) []Interval {
	var out []Interval
	open := map[string]int{} // client -> index in out
	for _, op := range ops {
		switch op.Kind {
		case Acquire:
			if op.OK {
				open[op.Client] = len(out)
				out = append(out, Interval{Client: op.Client, Token: op.Token, Called: op.Call, Start: op.Return, End: 1<<63 - 1, EndCall: 1<<63 - 1})
			}
		case Lost, Release:
			if i, ok := open[op.Client]; ok {
				out[i].End, out[i].EndCall, out[i].Lost = op.Return, op.Call, op.Kind == Lost
				delete(open, op.Client)
			}
		}
	}
	return out
}

// DoubleGrants counts the pairs of holds of different clients that
// certainly overlapped: one was granted (its Acquire returned) while the
// other still saw the lock held (before the start of its last Err() that
// said held, or its Unlock call).
func DoubleGrants(ops []Op) int {
	iv := Intervals(ops)
	n := 0
	for i := range iv {
		for j := i + 1; j < len(iv); j++ {
			a, b := iv[i], iv[j]
			if a.Client != b.Client && a.Start < b.EndCall && b.Start < a.EndCall {
				n++
			}
		}
	}
	return n
}

type mutexInput struct {
	client  int
	acquire bool
}

// mutexModel is a lock: acquire succeeds only when free, release only by
// its holder. The state is the holder's number, -1 when free.
var mutexModel = porcupine.Model{
	Init: func() any { return -1 },
	Step: func(state, input, _ any) (bool, any) {
		s, in := state.(int), input.(mutexInput)
		if in.acquire {
			return s == -1, in.client
		}
		return s == in.client, -1
	},
	DescribeOperation: func(input, _ any) string {
		in := input.(mutexInput)
		if in.acquire {
			return fmt.Sprintf("client %d acquire", in.client)
		}
		return fmt.Sprintf("client %d release", in.client)
	},
}

// CheckMutex checks with porcupine that the history is linearizable as one
// mutex: every successful Acquire, and every end of a hold (its loss,
// somewhere between the last time the holder saw it held and the loss
// signal, or its Unlock), can be ordered so that no two holds overlap. Use it for histories whose faults keep the store's data (a
// store that forgets a lock grants it again: see DoubleGrants). ops are one
// lock's: check each name's history on its own. A long history is cut into
// segments (see segments), so porcupine's time bound applies to each
// stretch between quiet points, not to the whole.
func CheckMutex(ops []Op) error {
	ids := map[string]int{}
	id := func(c string) int {
		if _, ok := ids[c]; !ok {
			ids[c] = len(ids)
		}
		return ids[c]
	}
	var hist []porcupine.Operation
	for _, iv := range Intervals(ops) {
		c := id(iv.Client)
		hist = append(hist, porcupine.Operation{ClientId: c, Input: mutexInput{client: c, acquire: true}, Call: int64(iv.Called), Return: int64(iv.Start)})
		if iv.End != 1<<63-1 {
			hist = append(hist, porcupine.Operation{ClientId: c, Input: mutexInput{client: c}, Call: int64(iv.EndCall), Return: int64(iv.End)})
		}
	}
	return check("mutex", mutexModel, hist, mutexKnown())
}

type registerInput struct {
	write bool
	token int64
}

// fencedModel is a fenced register: a write is accepted iff its token is at
// least the highest accepted so far (one holder may write again under its
// token) and rejected otherwise; a read returns the highest accepted token.
var fencedModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(int64), input.(registerInput)
		if !in.write {
			return output.(int64) == s, s
		}
		if output.(bool) {
			return in.token >= s, in.token
		}
		return in.token < s, s
	},
	DescribeOperation: func(input, output any) string {
		in := input.(registerInput)
		if in.write {
			return fmt.Sprintf("write(%d) -> %v", in.token, output)
		}
		return fmt.Sprintf("read() -> %v", output)
	},
}

// CheckFenced checks with porcupine that the Write and Read operations are
// linearizable as a fenced register: no write was accepted after a write
// with a higher token, and no write was rejected unless a higher one had
// been accepted. ops are one register's; a long history is checked in
// segments, as CheckMutex's is.
func CheckFenced(ops []Op) error {
	var hist []porcupine.Operation
	ids := map[string]int{}
	for _, op := range ops {
		if _, ok := ids[op.Client]; !ok {
			ids[op.Client] = len(ids)
		}
		switch op.Kind {
		case Write:
			hist = append(hist, porcupine.Operation{ClientId: ids[op.Client], Input: registerInput{write: true, token: op.Token}, Output: op.OK, Call: int64(op.Call), Return: int64(op.Return)})
		case Read:
			hist = append(hist, porcupine.Operation{ClientId: ids[op.Client], Input: registerInput{}, Output: op.Token, Call: int64(op.Call), Return: int64(op.Return)})
		}
	}
	return check("fenced register", fencedModel, hist, fencedKnown())
}

// CheckTokens checks that fencing tokens grow with grants: a grant that
// returned before another grant was called has the smaller token, and no two
// grants to different clients share a token.
func CheckTokens(ops []Op) error {
	var grants []Op
	for _, op := range ops {
		if op.Kind == Acquire && op.Token != 0 {
			grants = append(grants, op)
		}
	}
	var errs []string
	for i, a := range grants {
		for _, b := range grants[i+1:] {
			switch {
			case a.Client != b.Client && a.Token == b.Token:
				errs = append(errs, fmt.Sprintf("token %d granted to %s and %s", a.Token, a.Client, b.Client))
			case a.Return < b.Call && a.Token >= b.Token:
				errs = append(errs, fmt.Sprintf("%s got token %d after %s got %d", b.Client, b.Token, a.Client, a.Token))
			case b.Return < a.Call && b.Token >= a.Token:
				errs = append(errs, fmt.Sprintf("%s got token %d after %s got %d", a.Client, a.Token, b.Client, b.Token))
			}
		}
	}
	if len(errs) > 0 {
		return errors.New("faults: tokens: " + strings.Join(errs, "; "))
	}
	return nil
}

// ErrNotLinearizable is returned (wrapped) when porcupine finds a history
// that no order of its operations explains.
var ErrNotLinearizable = errors.New("faults: history not linearizable")

// check checks hist against m segment by segment (segments: each from the
// state the segments before it end in; known says where that state is
// certain), with the verdict of the whole history. An illegal history's
// error lists the segment that no order explains.
func check(what string, m porcupine.Model, hist []porcupine.Operation, known knownState) error {
	for _, seg := range segments(hist, m.Init(), known) {
		sm := m
		sm.Init = func() any { return seg.init }
		switch res := porcupine.CheckOperationsTimeout(sm, seg.ops, checkTimeout); res {
		case porcupine.Ok:
		case porcupine.Illegal:
			var b strings.Builder
			for _, op := range seg.ops {
				fmt.Fprintf(&b, "\n  [%v, %v] %s", time.Duration(op.Call), time.Duration(op.Return), m.DescribeOperation(op.Input, op.Output))
			}
			return fmt.Errorf("%w as a %s (from state %v):%s", ErrNotLinearizable, what, seg.init, b.String())
		default:
			return fmt.Errorf("faults: %s check: %s", what, res)
		}
	}
	return nil
}
