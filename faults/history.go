package faults

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Kind is what an Op did.
type Kind int

const (
	// Acquire is one Acquire call; OK means it returned a lease that was
	// still held (Err() nil) when it returned.
	Acquire Kind = iota
	// Release is one Unlock call of a lease that was held until then.
	Release
	// Lost is when a holder learned its lease was lost: after Call (the
	// last time it saw the lease held) and by Return (when it saw Done
	// closed or Err() non-nil).
	Lost
	// Write is one fenced write under Token; OK means the storage accepted it.
	Write
	// Read is one read of the fenced register; Token is the token it held.
	Read
)

func (k Kind) String() string {
	switch k {
	case Acquire:
		return "acquire"
	case Release:
		return "release"
	case Lost:
		return "lost"
	case Write:
		return "write"
	case Read:
		return "read"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Op is one recorded operation with its call and return times on the
// History's monotonic clock.
type Op struct {
	Kind   Kind
	Client string // who did it: one holder (one Client, one owner)
	Token  int64  // the fencing token granted, written or read
	OK     bool
	Call   time.Duration
	Return time.Duration
}

func (o Op) String() string {
	return fmt.Sprintf("%s %s token=%d ok=%v [%v, %v]", o.Client, o.Kind, o.Token, o.OK, o.Call, o.Return)
}

// History records the operations of one test. It is safe for concurrent
// use.
type History struct {
	start time.Time

	mu  sync.Mutex
	ops []Op
}

// NewHistory starts a history whose clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the time on the history's clock (monotonic).
func (h *History) Now() time.Duration { return time.Since(h.start) }

// At converts a time.Time taken in this process to the history's clock.
func (h *History) At(t time.Time) time.Duration { return t.Sub(h.start) }

// Add records op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the recorded operations ordered by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := slices.Clone(h.ops)
	slices.SortStableFunc(ops, func(a, b Op) int { return int(a.Call - b.Call) })
	return ops
}
