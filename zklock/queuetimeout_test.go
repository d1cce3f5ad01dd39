package zklock

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// TestQueueTimeout: a waiter's place lives as long as its session, so
// QueueTimeout(d) is refused (ErrInvalidDuration, nothing queued) for a d
// shorter than the session timeout and met by the session for any longer
// one: a waiter killed while it waits blocks the queue for at most the
// session timeout (plus a server tick), and the waiter behind it, which
// asked for QueueTimeout equal to the session timeout, is granted the lock
// by then.
func TestQueueTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	ctx := testCtx(t, 60*time.Second)
	a, b := dial(t, timeout), dial(t, timeout)
	n := lockName(t)
	for _, l := range []dlock.Locker{b.Mutex(n), b.Lock(n), b.RWLock(n).WriteLock(), b.MultiLock(n), b.Semaphore(n, 1)} {
		_, err := l.Acquire(ctx, dlock.QueueTimeout(timeout-time.Millisecond))
		if !errors.Is(err, dlock.ErrInvalidDuration) {
			t.Fatalf("%T: QueueTimeout below the session timeout: %v, want ErrInvalidDuration", l, err)
		}
	}
	if got := members(t, a, familyLock, n); len(got) != 0 {
		t.Fatalf("a refused QueueTimeout queued %v", got)
	}

	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := spawnChild(t, server.Addr(), n, timeout)
	waitMembers(t, a, n, 2) // the child waits behind a
	got := make(chan time.Time, 1)
	go func() {
		l, err := b.Mutex(n).Acquire(ctx, dlock.QueueTimeout(timeout))
		got <- time.Now()
		if err != nil {
			t.Error(err)
			return
		}
		l.Unlock(context.Background())
	}()
	waitMembers(t, a, n, 3) // b waits behind the child
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	granted := <-got
	waited := granted.Sub(killed)
	t.Logf("the waiter behind a killed waiter was granted %v after the kill (QueueTimeout = session timeout %v, server tick %v)", waited, timeout, tick)
	if waited > timeout+tick+time.Second {
		t.Fatalf("a killed waiter blocked the queue for %v, past QueueTimeout %v", waited, timeout)
	}
}
