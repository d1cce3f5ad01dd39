package witness

import (
	"fmt"
	"slices"
	"sync"
)

// Believer is what Beliefs needs of a held lock.
type Believer interface {
	Err() error // non-nil once the holder was told it lost the lock, on its own clock
	Token() int64
}

// Beliefs is the witness of a lock-delay: for every lock name, the holds
// granted and not yet given up. A grant made while another of them still
// believes it holds (its Err is nil) is a double grant, however soon that
// holder would have noticed. It is safe for concurrent use; the zero value
// is ready.
type Beliefs struct {
	mu     sync.Mutex
	held   map[string][]Believer
	grants int
	double []string
}

// Granted records that who was granted l on name, now.
func (b *Beliefs) Granted(name, who string, l Believer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[string][]Believer{}
	}
	b.grants++
	live := b.held[name][:0]
	for _, o := range b.held[name] {
		if o.Err() == nil {
			b.double = append(b.double, fmt.Sprintf("%s: %s granted token %d while token %d still held", name, who, l.Token(), o.Token()))
			live = append(live, o)
		}
	}
	b.held[name] = append(live, l)
}

// Leaving records that l's holder gives it up (call it before Unlock).
func (b *Beliefs) Leaving(name string, l Believer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[name] = slices.DeleteFunc(b.held[name], func(o Believer) bool { return o == l })
}

// Check returns the number of grants and a description of each double
// grant.
func (b *Beliefs) Check() (grants int, double []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grants, slices.Clone(b.double)
}
