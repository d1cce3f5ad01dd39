package witness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// lease is a Held whose loss the test decides.
type lease struct {
	token  int64
	done   chan struct{}
	err    error
	unlock int
}

func newLease(token int64) *lease { return &lease{token: token, done: make(chan struct{})} }

func (l *lease) Done() <-chan struct{}            { return l.done }
func (l *lease) Err() error                       { return l.err }
func (l *lease) Token() int64                     { return l.token }
func (l *lease) Unlock(ctx context.Context) error { l.unlock++; return nil }

func TestHistoryCheck(t *testing.T) {
	var h History
	a := h.Granted("a", "minority", 1)
	h.Left(a, true)
	time.Sleep(time.Millisecond)
	b := h.Granted("b", "majority", 2)
	h.Left(b, false)
	f, errs := h.Check()
	if len(errs) != 0 || f.Grants != 2 || f.Losses != 1 || f.MinMargin <= 0 || f.Overlaps != 0 || f.BySide["minority"] != 1 {
		t.Fatalf("a clean history: %v, %v", f, errs)
	}

	// A grant while the holder before it is inside, with a lower token,
	// before that holder was told it lost the lock.
	var bad History
	x := bad.Granted("x", "minority", 5)
	y := bad.Granted("y", "majority", 4)
	time.Sleep(time.Millisecond)
	bad.Left(x, true)
	bad.Left(y, false)
	f, errs = bad.Check()
	want := []string{"double grants", "token 4 after 5", "told it lost the lock"}
	if len(errs) != len(want) || f.Overlaps != 1 || f.MinMargin >= 0 {
		t.Fatalf("a bad history: %v, %v; want %d errors", f, errs, len(want))
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d: %v, want %q", i, errs[i], w)
		}
	}
}

func TestHoldEndsOnLossOrTime(t *testing.T) {
	var h History
	l := newLease(1)
	g := h.Granted("a", "s", l.Token())
	time.AfterFunc(20*time.Millisecond, func() { close(l.done) })
	if !h.HoldAndUnlock(g, l, time.Minute, nil) || g.Lost.IsZero() || l.unlock != 1 {
		t.Fatalf("Hold through a loss: lost at %v, %d unlocks", g.Lost, l.unlock)
	}
	// Err on the holder's clock counts as told, before Done.
	l = newLease(2)
	l.err = errors.New("lost")
	g = h.Granted("b", "s", l.Token())
	if !h.Hold(g, l, time.Minute, nil) {
		t.Fatal("Hold does not end on Err")
	}
	l = newLease(3)
	g = h.Granted("c", "s", l.Token())
	if h.Hold(g, l, 10*time.Millisecond, nil) || !g.Lost.IsZero() {
		t.Fatal("Hold for a while reports a loss")
	}
	if f, errs := h.Check(); len(errs) != 0 || f.Overlaps != 0 {
		t.Fatalf("%v %v", f, errs)
	}
}

func TestContend(t *testing.T) {
	var h History
	stop := make(chan struct{})
	n := 0
	acquire := func(ctx context.Context, wait time.Duration) (Held, error) {
		n++
		if n%2 == 0 {
			return nil, errors.New("busy")
		}
		if n > 6 {
			close(stop)
		}
		return newLease(int64(n)), nil
	}
	failed := h.Contend(context.Background(), "a", "s", acquire, time.Second, time.Millisecond, stop)
	f, errs := h.Check()
	if failed != 3 || f.Grants != 4 || len(errs) != 0 {
		t.Fatalf("Contend: %d failed, %v, %v", failed, f, errs)
	}
}
