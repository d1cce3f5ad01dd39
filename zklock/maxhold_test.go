package zklock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
)

// TestMaxHold: a lease kept by the session's heartbeat is lost at its
// MaxHold cap (observe.LostMaxHold), renewals notwithstanding, and its node
// is deleted, so the waiter behind it is granted the lock right after.
func TestMaxHold(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b := dial(t, 3*time.Second), dial(t, 3*time.Second)
	n := lockName(t)
	const cap = 1500 * time.Millisecond // past the first heartbeat (1 s)
	start := time.Now()
	l, err := a.Lock(n).Acquire(ctx, dlock.MaxHold(cap))
	if err != nil {
		t.Fatal(err)
	}
	next, err := b.Lock(n).Acquire(ctx, dlock.Wait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Since(start)
	defer next.Unlock(ctx)
	select {
	case <-l.Done():
	default:
		t.Fatal("the next holder was granted before the capped one was told")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), string(observe.LostMaxHold)) {
		t.Fatalf("Err %v, want a loss for %s", err, observe.LostMaxHold)
	}
	if granted < cap-50*time.Millisecond || granted > cap+2*time.Second {
		t.Fatalf("granted to the next %v after a %v cap", granted, cap)
	}
	t.Logf("granted to the next %v after the grant (MaxHold %v)", granted, cap)
}
