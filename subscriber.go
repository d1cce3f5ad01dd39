package dlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber is the Client's one pub/sub connection. Waiters join a lock's
// wake-up channel (reference-counted: the channel is subscribed while anyone
// waits on it). A release message wakes the longest-waiting local waiter
// ("1") or all of them ("a"); each (re)confirmed subscription wakes all of
// the channel's waiters, so a release published while the subscription was
// being set up or the connection was down is never waited out.
type subscriber struct {
	c *Client

	mu     sync.Mutex
	ps     *redis.PubSub // created on first use
	done   chan struct{} // closed when the reader goroutine exits
	chans  map[string]*wakeChannel
	closed bool
}

type wakeChannel struct {
	waiters []*waiter // in arrival order
}

// waiter is one Acquire call waiting for a lock.
type waiter struct {
	channel string
	wake    chan struct{} // buffered: one pending wake-up at most
}

func newSubscriber(c *Client) *subscriber {
	return &subscriber{c: c, chans: make(map[string]*wakeChannel)}
}

// join registers a waiter on channel, subscribing if it is the first.
func (s *subscriber) join(channel string) *waiter {
	w := &waiter{channel: channel, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return w // never woken by messages; its timer still runs
	}
	wc := s.chans[channel]
	if wc == nil {
		wc = &wakeChannel{}
		s.chans[channel] = wc
		s.subscribe(channel)
	}
	wc.waiters = append(wc.waiters, w)
	return w
}

// subscribe sends SUBSCRIBE; s.mu is held. A failure is not fatal: go-redis
// reconnects and resubscribes, and waiters also wake on their timers.
func (s *subscriber) subscribe(channel string) {
	if s.ps == nil {
		s.ps = s.c.rdb.Subscribe(context.Background())
		s.done = make(chan struct{})
		go s.read(s.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	}
	if err := s.ps.Subscribe(context.Background(), channel); err != nil && s.c.logger != nil {
		s.c.logger.Debug("dlock: subscribe failed", "channel", channel, "err", err)
	}
}

// leave removes w. A waiter that leaves without the lock wakes the next one,
// so a wake-up it took (or was about to take) is never lost.
func (s *subscriber) leave(w *waiter, acquired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wc := s.chans[w.channel]
	if wc == nil {
		return
	}
	for i, x := range wc.waiters {
		if x == w {
			wc.waiters = append(wc.waiters[:i], wc.waiters[i+1:]...)
			break
		}
	}
	if len(wc.waiters) == 0 {
		delete(s.chans, w.channel)
		if s.ps != nil && !s.closed {
			_ = s.ps.Unsubscribe(context.Background(), w.channel)
		}
		return
	}
	if !acquired {
		wc.wakeOne()
	}
}

// wait blocks until a wake-up, d elapsed, or ctx is done (its error).
func (w *waiter) wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wakeOne wakes the longest-waiting waiter that has no wake-up pending.
func (wc *wakeChannel) wakeOne() {
	for _, w := range wc.waiters {
		select {
		case w.wake <- struct{}{}:
			return
		default:
		}
	}
}

func (wc *wakeChannel) wakeAll() {
	for _, w := range wc.waiters {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (s *subscriber) read(msgs <-chan any) {
	defer close(s.done)
	for m := range msgs {
		s.mu.Lock()
		switch m := m.(type) {
		case *redis.Message:
			if wc := s.chans[m.Channel]; wc != nil {
				if m.Payload == "a" {
					wc.wakeAll()
				} else {
					wc.wakeOne()
				}
			}
		case *redis.Subscription:
			if wc := s.chans[m.Channel]; wc != nil && m.Kind == "subscribe" {
				wc.wakeAll()
			}
		}
		s.mu.Unlock()
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	ps, done := s.ps, s.done
	for _, wc := range s.chans {
		wc.wakeAll()
	}
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}
