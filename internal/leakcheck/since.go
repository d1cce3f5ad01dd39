package leakcheck

import (
	"strings"
	"time"
)

// Snapshot is the set of goroutines that were running when it was taken.
type Snapshot map[string]bool

// Take returns the goroutines running now (Since leaves them out).
func Take() Snapshot {
	s := Snapshot{}
	for _, g := range goroutines() {
		s[goroutineID(g)] = true
	}
	return s
}

// Since returns nil as soon as no goroutine started after s with a frame
// in a package that of accepts is running (the caller's own goroutine does
// not count). Otherwise it looks again, at growing intervals, until wait
// has passed, then returns an error wrapping ErrLeaked with their stacks.
func (s Snapshot) Since(wait time.Duration, of func(pkg string) bool) error {
	return until(wait, "started since the snapshot still running", func() []string {
		var left []string
		for i, g := range goroutines() {
			if i > 0 && !s[goroutineID(g)] && hasFrameIn(g, of) {
				left = append(left, g)
			}
		}
		return left
	})
}

// goroutineID returns the id in the first line of the stack g
// ("goroutine 42 [running]:").
func goroutineID(g string) string {
	id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
	return id
}

// hasFrameIn reports whether the stack g has a frame of a function in a
// package that of accepts.
func hasFrameIn(g string, of func(pkg string) bool) bool {
	for _, f := range functions(g) {
		if of(funcPackage(f)) {
			return true
		}
	}
	return false
}
