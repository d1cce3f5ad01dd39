package seam

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestErrorsWrapOnce: an error names its operation, shape and lock once, keeps its
// sentinel for errors.Is, and cuts an oversized name short.
func TestErrorsWrapOnce(t *testing.T) {
	err := Wrap("acquire", "mutex", "stock:1", ErrNotAcquired)
	if got, want := err.Error(), `dlock: acquire mutex "stock:1": not acquired`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatal("errors.Is lost the sentinel")
	}
	if again := Wrap("inspect", "", "stock:1", err); again != err {
		t.Fatalf("wrapped twice: %q", again)
	}
	long := Wrap("acquire", "lock", strings.Repeat("n", 5000), ErrInvalidName)
	if n := len(long.Error()); n > 200 {
		t.Fatalf("error text of %d bytes for an oversized name", n)
	}
	lost := Wrap("hold", "mutex", "x", errors.Join(ErrLockLost))
	if strings.Count(lost.Error(), "dlock:") != 1 {
		t.Fatalf("prefix repeated: %q", lost.Error())
	}
}

// TestWrapCall: a call on no one lock is named once, without a lock name;
// a loss found while holding is renamed for the call that reports it.
func TestWrapCall(t *testing.T) {
	err := WrapCall("new client", fmt.Errorf("%w: TTL 1ms (want >= 3ms)", ErrInvalidDuration))
	if got, want := err.Error(), "dlock: new client: invalid duration: TTL 1ms (want >= 3ms)"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalidDuration) || WrapCall("dial", err) != err {
		t.Fatalf("sentinel lost, or wrapped twice: %v", err)
	}
	lost := Wrap("hold", "mutex", "x", fmt.Errorf("%w (expired)", ErrLockLost))
	unlock := renamed("unlock", lost)
	if got, want := unlock.Error(), `dlock: unlock mutex "x": lock lost (expired)`; got != want || !errors.Is(unlock, ErrLockLost) {
		t.Fatalf("%q, want %q wrapping ErrLockLost", got, want)
	}
	if lost.Error() != `dlock: hold mutex "x": lock lost (expired)` {
		t.Fatalf("the hold's own error changed: %q", lost)
	}
}

// TestDrift: the client gives a lease up before the store can expire it.
func TestDrift(t *testing.T) {
	for _, ttl := range []time.Duration{3 * time.Millisecond, time.Second, 30 * time.Second} {
		d := Drift(ttl)
		if d <= 0 || d >= ttl {
			t.Errorf("Drift(%v) = %v", ttl, d)
		}
	}
}
