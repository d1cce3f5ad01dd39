package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
)

// lostRecorder records the reasons of LostEvents.
type lostRecorder struct {
	observe.Nop
	reasons chan observe.LostReason
}

func (r *lostRecorder) ObserveLost(ev observe.LostEvent) { r.reasons <- ev.Reason }

// MaxHold ends a lease the watchdog would keep for ever, and one that
// Extend would keep: at the cap the lease is lost with its own cause, the
// event says max_hold, and the lock is free in Redis at once for others.
func TestMaxHold(t *testing.T) {
	rdb := server(t)
	rec := &lostRecorder{reasons: make(chan observe.LostReason, 4)}
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond, Observer: rec})
	other := newClient(t, rdb)
	ctx := context.Background()
	const maxHold = 800 * time.Millisecond
	for _, tc := range []struct {
		name string
		opts []dlock.Option
	}{
		{"watchdog", nil},
		{"extended", []dlock.Option{dlock.LeaseTime(400 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			l, err := c.Mutex("maxhold-"+tc.name).Acquire(ctx, append(tc.opts, dlock.MaxHold(maxHold))...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.opts != nil {
				// Extend far past the cap: the cap stands.
				time.Sleep(200 * time.Millisecond)
				if err := l.Extend(ctx, time.Hour); err != nil {
					t.Fatalf("extend: %v", err)
				}
			}
			select {
			case <-l.Done():
			case <-time.After(maxHold + 5*time.Second):
				t.Fatal("the lease outlived its MaxHold")
			}
			held := time.Since(start)
			if held < maxHold-50*time.Millisecond {
				t.Fatalf("lost after %v, before its MaxHold of %v", held, maxHold)
			}
			err = l.Err()
			if !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), string(observe.LostMaxHold)) {
				t.Fatalf("Err = %v, want ErrLockLost (max_hold)", err)
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLockLost) {
				t.Fatalf("context cause %v", cause)
			}
			select {
			case r := <-rec.reasons:
				if r != observe.LostMaxHold {
					t.Fatalf("lost event reason %q, want %q", r, observe.LostMaxHold)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no lost event")
			}
			// Released in Redis: another client gets it without waiting out a lease.
			o, err := other.Mutex("maxhold-"+tc.name).Acquire(ctx, dlock.Wait(2*time.Second))
			if err != nil {
				t.Fatalf("another client after the cap: %v", err)
			}
			if waited := time.Since(start) - held; waited > time.Second {
				t.Errorf("the lock stayed held %v after the cap", waited)
			}
			if err := o.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("unlock after the cap: %v, want ErrLockLost", err)
			}
		})
	}
	if _, err := c.Mutex("x").Acquire(ctx, dlock.MaxHold(0)); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Fatalf("MaxHold(0): %v", err)
	}
}
