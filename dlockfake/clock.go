package dlockfake

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/clock"
)

// vclock is a Service's clock: virtual time that moves only when the test
// calls Advance, or (NewRealTime) real time plus what Advance added. Its
// timers fire in the order of their due times: on a virtual clock, inside
// Advance, each with the clock set to its due time; on a real-time one,
// from one time.Timer armed at the earliest.
type vclock struct {
	mu       sync.Mutex
	realTime bool
	at       time.Time // the time at real instant since (real time) or now (virtual)
	since    time.Time
	timers   []*vtimer   // pending, by due time, then by arming
	seq      uint64      // orders timers due at the same time
	wake     *time.Timer // real time: fires at timers[0]'s due time
	firing   int         // fire loops running
}

func newClock(realTime bool) *vclock {
	now := time.Now()
	return &vclock{realTime: realTime, at: now.Round(0), since: now}
}

// Now returns the clock's time.
func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

func (c *vclock) now() time.Time {
	if c.realTime {
		return c.at.Add(time.Since(c.since))
	}
	return c.at
}

// set moves the clock to t; c.mu is held.
func (c *vclock) set(t time.Time) {
	if t.After(c.now()) {
		c.at, c.since = t, time.Now()
	}
}

// advance moves the clock forward by d, firing every timer that falls due
// on the way, each with the clock at its due time.
func (c *vclock) advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	target := c.now().Add(d)
	c.fire(target)
	c.set(target)
	c.rearm()
	c.mu.Unlock()
}

// fire runs the timers due by until, in order; c.mu is held (and released
// while each runs). A timer armed meanwhile that is due by until runs in
// the same loop.
func (c *vclock) fire(until time.Time) {
	c.firing++
	defer func() { c.firing-- }()
	for len(c.timers) > 0 && !c.timers[0].due.After(until) {
		t := c.timers[0]
		c.timers = slices.Delete(c.timers, 0, 1)
		c.set(t.due)
		c.mu.Unlock()
		t.v.run(t.f)
		c.mu.Lock()
	}
}

// fireDue runs the timers due by now: the real-time timer's, and a
// virtual clock's when a timer is armed for a time that has come.
func (c *vclock) fireDue() {
	c.mu.Lock()
	c.fire(c.now())
	c.rearm()
	c.mu.Unlock()
}

// rearm points a real-time clock's timer at the earliest due time; c.mu
// is held.
func (c *vclock) rearm() {
	if !c.realTime {
		return
	}
	if len(c.timers) == 0 {
		if c.wake != nil {
			c.wake.Stop()
		}
		return
	}
	d := c.timers[0].due.Sub(c.now())
	if c.wake == nil {
		c.wake = time.AfterFunc(d, c.fireDue)
		return
	}
	c.wake.Reset(d)
}

// vtimer is a timer of a vclock (clock.Timer).
type vtimer struct {
	v   *view
	f   func()
	due time.Time
	seq uint64
}

// push arms t at due; c.mu is held. On a virtual clock, a timer due by now
// fires at once (in its own goroutine, as time.AfterFunc's), unless a fire
// loop running now takes it.
func (t *vtimer) push(due time.Time) {
	c := t.v.c
	c.seq++
	t.due, t.seq = due, c.seq
	i, _ := slices.BinarySearchFunc(c.timers, t, func(a, b *vtimer) int {
		return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.seq, b.seq))
	})
	c.timers = slices.Insert(c.timers, i, t)
	c.rearm()
	if !c.realTime && c.firing == 0 && !due.After(c.now()) {
		go c.fireDue()
	}
}

// pull disarms t, and reports whether it was pending; c.mu is held.
func (t *vtimer) pull() bool {
	c := t.v.c
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}

func (t *vtimer) Stop() bool {
	c := t.v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := t.pull()
	c.rearm()
	return pending
}

func (t *vtimer) Reset(d time.Duration) bool {
	due := t.v.Now().Add(d)
	c := t.v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := t.pull()
	t.push(due)
	return pending
}

// view is one Client's view of the clock: the Service's, except while the
// Client is paused, when its time stands still and its timers wait for
// Resume (a paused process runs nothing).
type view struct {
	c *vclock

	mu      sync.Mutex
	paused  bool
	frozen  time.Time     // the time it was paused at
	held    []func()      // timers that fell due while paused, in order
	resumed chan struct{} // closed by resume
}

var _ clock.Clock = (*view)(nil)

// Now returns the time as the Client sees it.
func (v *view) Now() time.Time {
	v.mu.Lock()
	if v.paused {
		defer v.mu.Unlock()
		return v.frozen
	}
	v.mu.Unlock()
	return v.c.Now()
}

// AfterFunc runs f once d has passed on the Client's clock.
func (v *view) AfterFunc(d time.Duration, f func()) clock.Timer { return v.at(v.Now().Add(d), f) }

// at runs f at due on the Client's clock (at once if due has passed).
func (v *view) at(due time.Time, f func()) *vtimer {
	t := &vtimer{v: v, f: f}
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	t.push(due)
	return t
}

// run runs f, a timer's, now or at Resume.
func (v *view) run(f func()) {
	v.mu.Lock()
	if v.paused {
		v.held = append(v.held, f)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	f()
}

func (v *view) pause() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.paused {
		v.paused, v.frozen, v.resumed = true, v.c.Now(), make(chan struct{})
	}
}

// resume lets the Client's time run again and runs, in order, the timers
// that fell due meanwhile, then lets its calls go on.
func (v *view) resume() {
	v.mu.Lock()
	if !v.paused {
		v.mu.Unlock()
		return
	}
	held, resumed := v.held, v.resumed
	v.paused, v.held = false, nil
	v.mu.Unlock()
	for _, f := range held {
		f()
	}
	close(resumed)
}

// awake returns once the Client is not paused: at once, or at Resume; or
// ctx's error, or ErrClosed once closing is closed.
func (v *view) awake(ctx context.Context, closing <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v.mu.Lock()
	paused, resumed := v.paused, v.resumed
	v.mu.Unlock()
	if !paused {
		return nil
	}
	select {
	case <-resumed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return dlock.ErrClosed
	}
}
