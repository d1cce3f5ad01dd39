package seam

import (
	"fmt"
	"strconv"
	"sync"
)

// Permits is the client's side of a semaphore whose permit count the store
// keeps: the count its acquisitions ask for, and the count a SetPermits in
// flight is writing. A backend's Semaphore holds one, compares what the
// store keeps with Accepts (a waiter woken by its own SetPermits takes the
// new count on; any other count refuses it), and changes the count with
// Set. Its zero value asks for 0 permits; it is safe for concurrent use.
type Permits struct {
	set sync.Mutex // one Set at a time

	mu      sync.Mutex
	n       int // as given, or set by Set
	pending int // the count a Set in flight is writing (0: none)
}

// NewPermits returns Permits that ask for n.
func NewPermits(n int) *Permits { return &Permits{n: n} }

// Count returns the count the acquisitions ask for.
func (p *Permits) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Accepts reports whether n, a count the store keeps, is this one's (or the
// one a Set in flight is writing).
func (p *Permits) Accepts(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return n == p.n || n == p.pending && p.pending > 0
}

// Set runs write, which writes n to the store, with n pending (Accepts
// takes it while write runs); once write succeeds the acquisitions ask for
// n. Calls of Set run one at a time. It returns write's error, and keeps
// the count it had if there is one.
func (p *Permits) Set(n int, write func() error) error {
	p.set.Lock()
	defer p.set.Unlock()
	p.mu.Lock()
	p.pending = n
	p.mu.Unlock()
	err := write()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = 0
	if err == nil {
		p.n = n
	}
	return err
}

// PermitsMismatch is the refusal of an acquisition whose Semaphore asks for
// want permits where the store keeps stored (as the store has it: a
// number, or whatever an operator wrote there). It wraps
// ErrInvalidArgument.
func PermitsMismatch(stored string, want int) error {
	if _, err := strconv.Atoi(stored); err != nil {
		stored = strconv.Quote(stored)
	}
	return fmt.Errorf("%w: the store keeps %s permits for this semaphore, another count than this Semaphore's %d (SetPermits changes it)",
		ErrInvalidArgument, stored, want)
}
