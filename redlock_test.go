package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redNodes starts n independent masters and returns them with one dlock
// Client and one go-redis client each. Clients do not retry (a down node
// fails at once) and time out reads after 2 s.
func redNodes(t *testing.T, n int, opts ...dlock.Config) ([]*redisproc.Server, []*dlock.Client, []*redis.Client) {
	t.Helper()
	srvs := redistest.StartMasters(t, n)
	cs := make([]*dlock.Client, n)
	rdbs := make([]*redis.Client, n)
	for i, s := range srvs {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		t.Cleanup(func() { rdbs[i].Close() })
		cs[i] = newClient(t, rdbs[i], opts...)
	}
	return srvs, cs, rdbs
}

// holdsKey reports which of rdbs hold the RedLock's key (a down node: false).
func holdsKey(rdbs []*redis.Client, name string) []bool {
	out := make([]bool, len(rdbs))
	for i, r := range rdbs {
		n, _ := r.Exists(context.Background(), "dlock:{"+name+"}").Result()
		out[i] = n == 1
	}
	return out
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// 2 of 5 nodes down: acquired on the 3 others. 3 of 5 down: not acquired,
// and no key left on the live nodes.
func TestRedLockNodesDown(t *testing.T) {
	srvs, cs, rdbs := redNodes(t, 5)
	ctx := context.Background()
	for _, i := range []int{1, 3} {
		if err := srvs[i].Stop(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := dlock.NewRedLock("down", cs...).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("2 of 5 down: %v", err)
	}
	if got := holdsKey(rdbs, "down"); count(got) != 3 || got[1] || got[3] {
		t.Fatalf("keys on %v, want the 3 live nodes", got)
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := holdsKey(rdbs, "down"); count(got) != 0 {
		t.Fatalf("keys left after unlock on %v", got)
	}

	if err := srvs[4].Stop(); err != nil {
		t.Fatal(err)
	}
	_, err = dlock.NewRedLock("down", cs...).Acquire(ctx, dlock.Wait(0))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("3 of 5 down, one try: %v, want ErrNotAcquired", err)
	}
	t.Log(err)
	_, err = dlock.NewRedLock("down", cs...).Acquire(ctx, dlock.Wait(300*time.Millisecond))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("3 of 5 down, retrying: %v, want ErrNotAcquired", err)
	}
	if got := holdsKey(rdbs, "down"); count(got) != 0 {
		t.Fatalf("failed attempts left keys on %v", got)
	}
}

// The quorum matrix: for N = 4 and N = 5, every subset of nodes pre-held by
// another owner; one try acquires iff at least 3 nodes are free, a failed
// try leaves nothing behind, and the other owner's holds are untouched.
func TestRedLockQuorumMatrix(t *testing.T) {
	for _, n := range []int{4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			_, cs, rdbs := redNodes(t, n)
			ctx := context.Background()
			for mask := 0; mask < 1<<n; mask++ {
				var held []*dlock.Lease
				free := n
				for i := range n {
					if mask&(1<<i) != 0 {
						l, err := cs[i].Lock("m").Acquire(ctx, dlock.Wait(0))
						if err != nil {
							t.Fatal(err)
						}
						held = append(held, l)
						free--
					}
				}
				l, err := dlock.NewRedLock("m", cs...).Acquire(ctx, dlock.Wait(0))
				want := free >= 3
				if (err == nil) != want {
					t.Fatalf("N=%d, %d free: acquired=%v (%v), want %v", n, free, err == nil, err, want)
				}
				if err != nil && !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("N=%d, %d free: %v", n, free, err)
				}
				if err == nil {
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if got := count(holdsKey(rdbs, "m")); got != n-free {
					t.Fatalf("N=%d, mask %b: %d keys after the try, want the %d pre-held", n, mask, got, n-free)
				}
				for _, h := range held {
					if err := h.Verify(ctx); err != nil {
						t.Fatalf("pre-held lock disturbed: %v", err)
					}
					_ = h.Unlock(ctx)
				}
			}
		})
	}
}

// Nodes slower than the lease: with one node fast, one paused (SIGSTOP) and
// one down, no quorum answers within the lease: not acquired, and the grant
// the paused node makes when it wakes up is given back.
func TestRedLockSlowNode(t *testing.T) {
	srvs, cs, rdbs := redNodes(t, 3)
	ctx := context.Background()
	if err := srvs[2].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srvs[1].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srvs[1].Resume() })
	start := time.Now()
	_, err := dlock.NewRedLock("slow", cs...).Acquire(ctx, dlock.LeaseTime(300*time.Millisecond), dlock.Wait(0))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("quorum only through a paused node: %v", err)
	}
	t.Logf("gave up after %v: %v", time.Since(start), err)
	if got := holdsKey(rdbs, "slow"); got[0] {
		t.Fatal("the fast node's grant was not given back")
	}
	if err := srvs[1].Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the paused node's late grant given back", func() bool { return !holdsKey(rdbs, "slow")[1] })
}

// The lease is lost when fewer than a quorum still hold it; with a quorum
// left, the watchdog keeps it.
func TestRedLockLostBelowQuorum(t *testing.T) {
	const timeout = 600 * time.Millisecond
	_, cs, rdbs := redNodes(t, 5, dlock.Config{TTL: timeout})
	ctx := context.Background()
	l, err := dlock.NewRedLock("q", cs...).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdbs[0].Del(ctx, "dlock:{q}")
	rdbs[1].Del(ctx, "dlock:{q}")
	time.Sleep(2 * timeout) // several renewals over the 3 nodes left
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("with 3 of 5 nodes: %v", err)
	}
	rdbs[2].Del(ctx, "dlock:{q}")
	if !closedWithin(l.Done(), timeout/3+300*time.Millisecond) {
		t.Fatal("not lost within one renewal of dropping below the quorum")
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock: %v", err)
	}
	if got := holdsKey(rdbs, "q"); count(got) != 0 {
		t.Fatalf("keys left on %v", got)
	}
}

// Extend needs a quorum; without one the lease runs out on its deadline.
// Tokens increase from one grant to the next; the owner re-enters.
func TestRedLockExtendAndTokens(t *testing.T) {
	srvs, cs, _ := redNodes(t, 5)
	ctx := context.Background()
	rl := dlock.NewRedLock("ext", cs...)
	first, err := rl.Acquire(ctx, dlock.LeaseTime(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := rl.Acquire(first.Context(), dlock.Wait(0))
	if err != nil || inner.Token() != first.Token() {
		t.Fatalf("re-entry: %v", err)
	}
	_ = inner.Unlock(ctx)
	if err := first.Extend(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := rl.Acquire(ctx, dlock.LeaseTime(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= first.Token() {
		t.Fatalf("token %d not above the previous %d", l.Token(), first.Token())
	}
	for _, i := range []int{0, 2, 4} {
		_ = srvs[i].Stop()
	}
	if err := l.Extend(ctx, 5*time.Second); err == nil {
		t.Fatal("Extend with 2 of 5 nodes up succeeded")
	}
	if !closedWithin(l.Done(), 2*time.Second) {
		t.Fatal("lease not lost at the end of its 1s lease")
	}
}

func ExampleNewRedLock() {
	ctx := context.Background()
	// In production: one Client per independent master (not replicas).
	var clients []*dlock.Client
	for range 3 {
		c, err := dlock.New(exampleRedis(), dlock.Config{Prefix: fmt.Sprintf("node%d:", len(clients))})
		if err != nil {
			panic(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	l, err := dlock.NewRedLock("report:daily", clients...).Acquire(ctx, dlock.Wait(time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Unlock(ctx))
	// Output: <nil>
}
