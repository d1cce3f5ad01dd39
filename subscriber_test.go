package dlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/redistest"
)

// A release message that reaches a lingering channel with no waiter (the
// waiter was refused just before the release and has not joined yet) wakes
// the next waiter to join; a message aimed at someone else's id does not.
func TestSubscriberMissedRelease(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const ch, marker = "dlock:{m}:wake", "dlock:{marker}:wake"
	// Both channels subscribed, then left: they linger with no waiter.
	for _, name := range []string{ch, marker} {
		w := c.sub.join(name, "first", true)
		for rdb.PubSubNumSub(ctx, name).Val()[name] == 0 {
			time.Sleep(time.Millisecond)
		}
		c.sub.leave(w, true)
	}
	missed := func(name string) bool {
		c.sub.mu.Lock()
		defer c.sub.mu.Unlock()
		wc := c.sub.chans[name]
		return wc != nil && !wc.missed.IsZero()
	}
	// seen waits until a "1" published after everything else on ch has
	// reached the subscriber (one connection: messages arrive in order).
	seen := func() {
		rdb.Publish(ctx, marker, "1")
		deadline := time.Now().Add(5 * time.Second)
		for !missed(marker) {
			if time.Now().After(deadline) {
				t.Fatal("marker not delivered within 5s")
			}
			time.Sleep(time.Millisecond)
		}
		w := c.sub.join(marker, "reset", false) // consumes the marker
		c.sub.leave(w, true)
	}

	rdb.Publish(ctx, ch, "someone's op id")
	seen()
	w := c.sub.join(ch, "second", false)
	if len(w.wake) != 0 {
		t.Fatal("a message aimed at another waiter woke a new one")
	}
	c.sub.leave(w, true)

	rdb.Publish(ctx, ch, "1")
	seen()
	w = c.sub.join(ch, "third", false)
	defer c.sub.leave(w, true)
	if len(w.wake) != 1 {
		t.Fatal("a release that found no waiter did not wake the next one to join")
	}
}
