package etcdlock

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// TestElectionMargin: the Client learns the cluster's minimum lease TTL
// before its first session (1 s on the shared FastElection member: 1.5
// election timeouts of 500 ms, rounded up), leaving no lease behind, and
// holds its session for the TTL less 2/5 of it past a keepalive; Extend
// refuses more than that on the session, and moves a lease of its own
// that would need more than its TTL less the margin to a new lease.
func TestElectionMargin(t *testing.T) {
	admin := etcdClient(t)
	ctx := testCtx(t, 30*time.Second)
	before, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{TTL: 3 * time.Second})
	n := lockName(t)
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, keep := c.minLease(), c.keepFor(); m != time.Second || keep != 2600*time.Millisecond {
		t.Fatalf("minimum TTL %v, session held %v past a keepalive; want 1s and 2.6s", m, keep)
	}
	after, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	had := map[int64]bool{}
	for _, ls := range before.Leases {
		had[int64(ls.ID)] = true
	}
	for _, ls := range after.Leases {
		if !had[int64(ls.ID)] && ls.ID != c.sessionID() {
			t.Errorf("lease %x left behind (the session's is %x)", ls.ID, c.sessionID())
		}
	}
	if err := l.Extend(ctx, 2800*time.Millisecond); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Errorf("Extend(2.8s) on a 3s session: %v, want ErrInvalidDuration", err)
	}
	if err := l.Extend(ctx, 2600*time.Millisecond); err != nil {
		t.Errorf("Extend(2.6s): %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	f, err := c.Mutex(n).Acquire(ctx, dlock.LeaseTime(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	own := keysIn(t, admin, c.dir("mutex", n))
	if err := f.Extend(ctx, 1800*time.Millisecond); err != nil { // past 2s - 400ms
		t.Fatal(err)
	}
	moved := keysIn(t, admin, c.dir("mutex", n))
	if len(own) != 1 || len(moved) != 1 || moved[0].lease == own[0].lease {
		t.Fatalf("Extend(1.8s) of a 2s lease of its own: keys %v, were %v; want them on a new lease", moved, own)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
