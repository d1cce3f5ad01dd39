package etcdlock

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

func TestSmoke(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	l, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease)
	go func() {
		l2, err := b.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(100 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	t.Log(l.Token(), l2.Token(), l2.ID())
	if err := l2.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
