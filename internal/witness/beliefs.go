package witness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
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

// Contend plays one lock name of a lock-delay test: held, granted to its
// holder and already recorded, is kept until it is lost or stop closes;
// waiter queues behind it at once (waiting up to wait); prober tries the
// lock without waiting every 100 ms until stop closes. Every grant is
// recorded in b and kept as a holder keeps a lock (until it is lost or
// stop closes), then unlocked. wg counts the goroutines it starts.
func (b *Beliefs) Contend(ctx context.Context, name string, held Held, waiter, prober Acquire, wait time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) {
	hold := func(l Held) {
		select {
		case <-l.Done():
		case <-stop:
		}
		b.Leaving(name, l)
		uctx, cancel := context.WithTimeout(ctx, unlockTimeout)
		_ = l.Unlock(uctx)
		cancel()
	}
	wg.Add(3)
	go func() { defer wg.Done(); hold(held) }()
	go func() {
		defer wg.Done()
		if l, err := waiter(ctx, wait); err == nil {
			b.Granted(name, "waiter", l)
			hold(l)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			l, err := prober(pctx, 0)
			cancel()
			if err == nil {
				b.Granted(name, "prober", l)
				b.Leaving(name, l)
				_ = l.Unlock(ctx)
			}
		}
	}()
}
