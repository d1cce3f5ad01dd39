// Package clock is the time a seam.Keeper keeps its deadlines by: the real,
// monotonic clock (a nil Clock), or a clock a test moves (dlockfake's). A
// nil Clock costs a nil check and nothing else: the real backends' paths do
// not allocate for it.
package clock

import "time"

// Clock is a source of time and of timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or the goroutine that moves
	// the clock) once d has passed on this clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc (a *time.Timer on the real clock).
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// Now returns the time on c: time.Now() when c is nil.
func Now(c Clock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}

// Since returns the time passed since t on c.
func Since(c Clock, t time.Time) time.Duration {
	if c == nil {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// Until returns the time left until t on c.
func Until(c Clock, t time.Time) time.Duration {
	if c == nil {
		return time.Until(t)
	}
	return t.Sub(c.Now())
}

// AfterFunc is time.AfterFunc on c.
func AfterFunc(c Clock, d time.Duration, f func()) Timer {
	if c == nil {
		return time.AfterFunc(d, f)
	}
	return c.AfterFunc(d, f)
}
