package etcdlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/witness"
)

// Faults on a real 3-member cluster: the leader killed, the leader paused
// (SIGSTOP), a holder cut off from the cluster. Every holder whose session
// survives keeps its lock with no second holder; a holder whose session may
// have expired is told before anyone else is granted the lock.

func startCluster(t *testing.T) *etcdproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := etcdproc.StartCluster(ctx, 3, etcdproc.Options{NoFsync: true, FastElection: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// contention is clients taking one Mutex in turn, each grant checked by an
// overlap witness and its token by the one before it.
type contention struct {
	name string
	w    witness.Witness

	mu        sync.Mutex
	grants    int
	tokens    []int64
	lost      int // holds reported lost while held
	failed    int // acquisitions that ended without the lock
	last      time.Time
	longest   time.Duration // the longest stretch without a grant
	grantedAt []time.Time
}

func (r *contention) granted(token int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.last.IsZero() {
		r.longest = max(r.longest, now.Sub(r.last))
	}
	r.last = now
	r.grants++
	r.tokens = append(r.tokens, token)
	r.grantedAt = append(r.grantedAt, now)
}

// run makes each client take the lock over and over until stop closes.
func (r *contention) run(ctx context.Context, clients []*Client, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := c.Mutex(r.name).Acquire(ctx, dlock.Wait(8*time.Second))
				if err != nil {
					r.mu.Lock()
					r.failed++
					r.mu.Unlock()
					continue
				}
				r.w.Enter(r.name)
				r.granted(l.Token())
				select {
				case <-time.After(2 * time.Millisecond):
				case <-l.Done():
					r.mu.Lock()
					r.lost++
					r.mu.Unlock()
				}
				r.w.Exit(r.name)
				uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = l.Unlock(uctx)
				cancel()
			}
		}()
	}
	return &wg
}

func (r *contention) check(t *testing.T, after time.Time) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if o := r.w.Overlaps(); o != 0 {
		t.Errorf("%d overlapping holders in %d grants", o, r.grants)
	}
	for i := 1; i < len(r.tokens); i++ {
		if r.tokens[i] <= r.tokens[i-1] {
			t.Errorf("grant %d has token %d after %d", i, r.tokens[i], r.tokens[i-1])
		}
	}
	n := 0
	for _, at := range r.grantedAt {
		if at.After(after) {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no grant after the fault (%d before)", r.grants)
	}
	t.Logf("%d grants (%d after the fault), %d lost while held, %d failed acquisitions, longest stretch without a grant %v",
		r.grants, n, r.lost, r.failed, r.longest.Round(time.Millisecond))
}

// clusterClients returns n Clients, each on its own etcd client of every
// member.
func clusterClients(t *testing.T, cl *etcdproc.Cluster, n int, ttl time.Duration) []*Client {
	cs := make([]*Client, n)
	for i := range cs {
		c, err := New(etcdClient(t, cl.Endpoints()...), Config{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// prober tries to take name with Wait(0) until stop closes, and reports a
// grant on got.
func prober(ctx context.Context, c *Client, name string, stop <-chan struct{}) <-chan *dlock.Lease {
	got := make(chan *dlock.Lease, 1)
	go func() {
		defer close(got)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			l, err := c.Mutex(name).Acquire(pctx, dlock.Wait(0))
			cancel()
			if err == nil {
				got <- l
				return
			}
		}
	}()
	return got
}

func TestLeaderKilled(t *testing.T) {
	cl := startCluster(t)
	ctx := testCtx(t, 90*time.Second)
	clients := clusterClients(t, cl, 8, 5*time.Second)
	long := lockName(t) + ".long"
	held, err := clients[0].Mutex(long).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &contention{name: lockName(t)}
	stop := make(chan struct{})
	probe := prober(ctx, clients[1], long, stop)
	wg := r.run(ctx, clients[2:], stop)
	time.Sleep(time.Second)
	leader, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %v after the kill", time.Since(killed).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	r.check(t, killed)
	if l := <-probe; l != nil {
		t.Fatalf("a prober was granted the lock its holder kept through the leader change (holder err %v)", held.Err())
	}
	// The holder's session survived the leader change: it still holds.
	if err := held.Verify(ctx); err != nil {
		t.Fatalf("the holder through the leader change: %v", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLeaderPaused(t *testing.T) {
	cl := startCluster(t)
	ctx := testCtx(t, 90*time.Second)
	clients := clusterClients(t, cl, 8, 5*time.Second)
	long := lockName(t) + ".long"
	held, err := clients[0].Mutex(long).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var told time.Time
	toldCh := make(chan struct{})
	go func() {
		<-held.Done()
		told = time.Now()
		close(toldCh)
	}()
	r := &contention{name: lockName(t)}
	stop := make(chan struct{})
	probe := prober(ctx, clients[1], long, stop)
	wg := r.run(ctx, clients[2:], stop)
	time.Sleep(time.Second)
	leader, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	time.Sleep(3 * time.Second)
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	r.check(t, paused)
	if l := <-probe; l != nil {
		granted := time.Now()
		select {
		case <-toldCh:
			if told.After(granted) {
				t.Fatalf("the holder was told at %v, after the prober's grant at %v", told, granted)
			}
		default:
			t.Fatal("a prober was granted the lock while its holder was never told it lost it")
		}
		t.Logf("the holder's session expired during the pause; it was told first")
		_ = l.Unlock(ctx)
		return
	}
	select {
	case <-toldCh:
		t.Logf("the holder was told it lost the lock; nobody else got it")
	default:
		if err := held.Verify(ctx); err != nil {
			t.Fatalf("the holder through the pause: %v", err)
		}
		t.Logf("the holder kept its lock through the pause")
	}
	_ = held.Unlock(ctx)
}

// A holder cut off from the cluster is told its lock is lost before the
// cluster expires its session and grants the lock to another client; a
// waiter cut off gets ErrNotAcquired or its ctx error.
func TestHolderCutOff(t *testing.T) {
	cl := startCluster(t)
	ctx := testCtx(t, 60*time.Second)
	p, err := etcdproc.NewProxy(cl.Members[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, err := New(etcdClient(t, p.Endpoint()), Config{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := clusterClients(t, cl, 1, 3*time.Second)[0]
	n := lockName(t)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var told time.Time
	toldCh := make(chan struct{})
	go func() {
		<-held.Done()
		told = time.Now()
		close(toldCh)
	}()
	p.Cut()
	cut := time.Now()

	// Waiting behind a cut link ends by the wait or the ctx.
	if _, err := a.Mutex(n+".other").Acquire(ctx, dlock.Wait(500*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Wait(500ms) cut off: %v, want ErrNotAcquired", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := a.Mutex(n + ".other").Acquire(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline cut off: %v, want context.DeadlineExceeded", err)
	}
	cancel()

	l, err := b.Mutex(n).Acquire(ctx, dlock.Wait(20*time.Second))
	if err != nil {
		t.Fatalf("the cut-off holder's lock never came free: %v", err)
	}
	granted := time.Now()
	select {
	case <-toldCh:
	default:
		t.Fatal("another client was granted the lock before the cut-off holder was told")
	}
	if told.After(granted) {
		t.Fatalf("told at %v, after the grant at %v", told, granted)
	}
	t.Logf("holder told %v after the cut, the other client granted %v after it (TTL 3 s)",
		told.Sub(cut).Round(time.Millisecond), granted.Sub(cut).Round(time.Millisecond))
	if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of the cut-off holder: %v, want ErrLockLost", err)
	}
	if l.Token() <= held.Token() {
		t.Fatalf("token %d after %d", l.Token(), held.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The link back: the cut-off client takes locks again, on a new session.
	p.Heal()
	again, err := a.Mutex(n).Acquire(ctx, dlock.Wait(20*time.Second))
	if err != nil {
		t.Fatalf("after the link came back: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
