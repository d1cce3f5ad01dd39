package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/faults"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// newProxy starts a toxiproxy in front of addr, closed at cleanup.
func newProxy(t *testing.T, addr string) *faults.Proxy {
	t.Helper()
	p, err := faults.NewProxy(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// networkFault is one fault of the link between the holders and Redis.
type networkFault struct {
	name   string
	strike func(p *faults.Proxy) error
}

var networkFaults = []networkFault{
	{"latency-over-lease", func(p *faults.Proxy) error { return p.Delay(wd * 3 / 2) }},
	{"timeout", func(p *faults.Proxy) error { return p.Timeout(100 * time.Millisecond) }},
	{"reset_peer", func(p *faults.Proxy) error { return p.ResetPeer(0) }},
	{"blackhole", func(p *faults.Proxy) error { return p.Blackhole() }},
}

// TestNetworkFaults cuts or slows the link between every shape's holder and
// Redis (the contender and the probe reach Redis directly): each holder must
// learn it lost its lock before the server could grant it to the contender
// (renewal replies that come back late do not count), and its late write is
// rejected.
func TestNetworkFaults(t *testing.T) {
	for _, nf := range networkFaults {
		t.Run(nf.name, func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			st := store(t)
			px := newProxy(t, srv.Addr())
			probe := probeClient(t, srv)
			scs := make([]*scenario, len(shapes))
			for i, sh := range shapes {
				scs[i] = setUp(t, sh, "nf-"+sh.name, newRDB(t, px.Addr()), newRDB(t, srv.Addr()), probe, st, wd)
			}
			for _, sc := range scs {
				if !sc.ew.MustSample() {
					t.Fatalf("%s: cannot read the holder's expiry", sc.sh.name)
				}
			}
			at := time.Now()
			if err := nf.strike(px); err != nil {
				t.Fatal(err)
			}
			for _, sc := range scs {
				sc.hl.lost(15 * time.Second)
			}
			if err := px.Heal(); err != nil {
				t.Fatal(err)
			}
			for i, sh := range shapes {
				t.Run(sh.name, func(t *testing.T) {
					scs[i].t = t
					report(t, scs[i].finish(nf.name, at, mustLose, true))
				})
			}
		})
	}
}

// lateFigures is what a late-reply test measured.
type lateFigures struct {
	Test       string `json:"test"`
	Rounds     int    `json:"rounds"`
	LateGrants int    `json:"late_grants"`           // Acquire returned after the lease could have run out
	LateHeld   int    `json:"late_grants_seen_held"` // of those, with Err() nil: must be 0
	Errors     int    `json:"acquire_errors"`        // Acquire returned an error (a late grant given back)
	Early      int    `json:"early_returns"`         // Acquire returned before the delay: the proxy failed
	Zombies    int    `json:"zombie_holds"`
}

// TestLateGrantZombie is issue 11 item 1: the watchdog keeps the lock
// (1 s timeout, no LeaseTime) and every reply comes 1.2 s late, so each
// grant arrives after its lease could have run out. Over 100 rounds (50 at
// a time, Mutex and reentrant Lock), Acquire must never return a lease whose
// Err() is nil past its deadline, and afterwards the Client must keep no
// hold (Stats: Holds 0, Watched 0), i.e. no zombie renewed for ever. A
// late grant may come back as a lease lost from the start or be given back
// and Acquire go on trying (each try is late again, so it ends with its ctx).
func TestLateGrantZombie(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	px := newProxy(t, srv.Addr())
	rdb := newRDB(t, px.Addr(), func(o *redis.Options) { o.PoolSize = 64 })
	const timeout, delay, rounds, parallel = time.Second, 1200 * time.Millisecond, 100, 50
	c := newClient(t, rdb, dlock.Config{TTL: timeout})
	if err := px.Delay(delay); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	f := lateFigures{Test: t.Name(), Rounds: rounds}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range rounds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var lk dlock.Locker = c.Mutex(fmt.Sprintf("late-%d", i))
			if i%2 == 1 {
				lk = c.Lock(fmt.Sprintf("late-%d", i))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			call := time.Now()
			l, err := lk.Acquire(ctx)
			ret := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if ret.Sub(call) < delay {
				f.Early++
			}
			if err != nil { // a late grant given back and refused: allowed
				f.Errors++
				return
			}
			if ret.Sub(call) >= timeout {
				f.LateGrants++
				if e := l.Err(); e == nil {
					f.LateHeld++
					t.Errorf("round %d (%s): Acquire returned %v after it was called with Err() nil (lease %v)", i, lk.Name(), ret.Sub(call), timeout)
				} else if !errors.Is(e, dlock.ErrLockLost) {
					t.Errorf("round %d: Err() = %v, want ErrLockLost", i, e)
				}
			}
			mu.Unlock()
			l.Unlock(context.Background())
			mu.Lock()
		}()
	}
	wg.Wait()
	if err := px.Heal(); err != nil {
		t.Fatal(err)
	}
	// A zombie would be renewed for ever: give the watchdog two rounds.
	time.Sleep(timeout * 2 / 3)
	if s := c.Stats(); s.Holds != 0 || s.Watched != 0 {
		f.Zombies = s.Holds + s.Watched
		t.Errorf("after every lease ended: Stats %+v, want Holds 0 Watched 0 (a zombie hold)", s)
	}
	if f.Early > 0 {
		t.Errorf("%d Acquire calls returned before the %v reply delay: the proxy did not delay them", f.Early, delay)
	}
	report(t, f)
}

// TestLateReplies delays Redis's replies to one holder beyond its fixed
// lease on each operation in turn: the reply to Acquire (a late grant),
// Extend, Verify and Unlock. A late grant is never used, a late "extended"
// or "still yours" never revives a lease whose deadline passed, and the
// contender (direct to Redis) never holds while the holder thinks it does.
func TestLateReplies(t *testing.T) {
	const lease = 400 * time.Millisecond
	late := lease * 3 / 2
	cases := []struct {
		op  string
		run func(ctx context.Context, t *testing.T, a *holder, px *faults.Proxy) *held
	}{
		{"acquire", func(ctx context.Context, t *testing.T, a *holder, px *faults.Proxy) *held {
			if err := px.Delay(late); err != nil {
				t.Fatal(err)
			}
			actx, cancel := context.WithTimeout(ctx, 3*late)
			defer cancel()
			hl, err := a.acquire(actx, dlock.LeaseTime(lease))
			if err != nil { // given back and refused: allowed
				return nil // refused or failed: not a grant, nothing to check
			}
			if hl.l.Err() == nil {
				t.Errorf("a grant that came %v late (lease %v) was returned held", late, lease)
			}
			return hl
		}},
		{"extend", func(ctx context.Context, t *testing.T, a *holder, px *faults.Proxy) *held {
			hl := mustAcquire(ctx, t, a, dlock.LeaseTime(lease))
			if err := px.Delay(late); err != nil {
				t.Fatal(err)
			}
			if err := hl.l.Extend(ctx, 5*lease); !errors.Is(err, dlock.ErrLockLost) {
				t.Errorf("Extend whose reply came after the lease ran out = %v, want ErrLockLost", err)
			}
			if hl.l.Err() == nil {
				t.Errorf("lease revived by a late Extend reply")
			}
			return hl
		}},
		{"verify", func(ctx context.Context, t *testing.T, a *holder, px *faults.Proxy) *held {
			hl := mustAcquire(ctx, t, a, dlock.LeaseTime(lease))
			if err := px.Delay(late); err != nil {
				t.Fatal(err)
			}
			if err := hl.l.Verify(ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Errorf("Verify whose reply came after the lease ran out = %v, want ErrLockLost", err)
			}
			return hl
		}},
		{"unlock", func(ctx context.Context, t *testing.T, a *holder, px *faults.Proxy) *held {
			hl := mustAcquire(ctx, t, a, dlock.LeaseTime(5*lease))
			if err := px.Delay(late); err != nil {
				t.Fatal(err)
			}
			if err := hl.unlock(ctx); err != nil {
				t.Errorf("Unlock with a late reply: %v", err)
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.op, func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			px := newProxy(t, srv.Addr())
			st := store(t)
			h := faults.NewHistory()
			ca := newClient(t, newRDB(t, px.Addr()))
			cb := newClient(t, newRDB(t, srv.Addr()))
			name := "late-" + tc.op
			a := &holder{name: "A", h: h, c: ca, lk: ca.Mutex(name), store: st, key: "data"}
			b := &holder{name: "B", h: h, c: cb, lk: cb.Mutex(name), store: st, key: "data"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// B waits for the lock the whole time.
			bDone := make(chan error, 1)
			go func() {
				hl, err := b.acquire(ctx, dlock.LeaseTime(10*lease))
				if err == nil {
					_, err = b.write(ctx, hl.l.Token())
					hl.unlock(ctx)
				}
				bDone <- err
			}()
			hl := tc.run(ctx, t, a, px)
			if hl != nil {
				if hl.l.Err() != nil { // lost: a late write is rejected once B wrote
					<-hl.done
				}
				if err := px.Heal(); err != nil {
					t.Fatal(err)
				}
				hl.unlock(ctx)
			} else if err := px.Heal(); err != nil {
				t.Fatal(err)
			}
			if err := <-bDone; err != nil {
				t.Fatalf("B: %v", err)
			}
			readBack(t, h, st, "data")
			checkHistory(t, h, true)
			noZombie(t, "A", ca)
			noZombie(t, "B", cb)
			// A grant whose reply came after Acquire gave up is given back in
			// the background; Close waits for that.
			if err := ca.Close(); err != nil {
				t.Fatal(err)
			}
			if keys := leakedKeys(t, newRDB(t, srv.Addr())); len(keys) > 0 {
				t.Errorf("keys left: %v", keys)
			}
			report(t, map[string]any{"test": t.Name(), "lease_ms": ms(lease), "reply_delay_ms": ms(late),
				"holder_lost": hl != nil && hl.l.Err() != nil, "double_grants": faults.DoubleGrants(h.Ops())})
		})
	}
}

func mustAcquire(ctx context.Context, t *testing.T, a *holder, opts ...dlock.Option) *held {
	t.Helper()
	hl, err := a.acquire(ctx, opts...)
	if err != nil || hl.l.Err() != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := a.write(ctx, hl.l.Token()); err != nil {
		t.Fatal(err)
	}
	return hl
}

// TestAcquireHonoursDeadline sends Acquire into a black hole: Redis never
// answers. Acquire must return by its ctx deadline (plus scheduling slack)
// with an error wrapping context.DeadlineExceeded, whether or not the
// go-redis client enables ContextTimeoutEnabled (without it go-redis waits
// for its ReadTimeout, whatever the ctx says; 1 s here to keep the test
// short). Mutex queues its waiters, Semaphore does not.
func TestAcquireHonoursDeadline(t *testing.T) {
	const deadline, slack = 300 * time.Millisecond, 400 * time.Millisecond
	for _, cte := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", cte), func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t)
			px := newProxy(t, srv.Addr())
			rdb := newRDB(t, px.Addr(), func(o *redis.Options) { o.ContextTimeoutEnabled, o.ReadTimeout = cte, time.Second })
			c := newClient(t, rdb)
			if err := rdb.Ping(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			if err := px.Blackhole(); err != nil {
				t.Fatal(err)
			}
			for _, lk := range []dlock.Locker{c.Mutex("bh"), c.Semaphore("bh-sem", 2)} {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				l, err := lk.Acquire(ctx)
				took := time.Since(start)
				cancel()
				report(t, map[string]any{"test": t.Name(), "shape": fmt.Sprintf("%T", lk), "ctx_deadline_ms": ms(deadline), "returned_after_ms": ms(took)})
				if err == nil {
					l.Unlock(context.Background())
					t.Errorf("%T: Acquire through a black hole succeeded", lk)
					continue
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%T: Acquire = %v, want an error wrapping context.DeadlineExceeded", lk, err)
				}
				if took > deadline+slack {
					t.Errorf("%T: Acquire returned %v after it was called; its ctx deadline was %v", lk, took, deadline)
				}
			}
			if err := px.Heal(); err != nil {
				t.Fatal(err)
			}
			noZombie(t, "client", c)
		})
	}
}

// TestDeadlineReplyLost: Redis runs the acquire, and its reply comes after
// the caller's deadline (toxiproxy delays every reply 1 s; the deadline is
// 300 ms; go-redis's default options). Acquire returns at its deadline
// with DeadlineExceeded, and the grant it never read is given back: a
// Mutex leaves its queue, a Semaphore's permit and a new reader's hold are
// released, so another client gets each lock long before its 30 s lease.
// Keyspace notifications show that the grant was made.
func TestDeadlineReplyLost(t *testing.T) {
	const deadline, slack = 300 * time.Millisecond, 400 * time.Millisecond
	noLeaks(t)
	srv := redistest.Start(t)
	direct := redistest.Client(t, srv)
	px := newProxy(t, srv.Addr())
	rdb := newRDB(t, px.Addr())
	c := newClient(t, rdb)
	other := newClient(t, direct)
	// Loads the function library: the acquires below run at once.
	if l, err := c.Mutex("lost-warm").Acquire(context.Background()); err != nil {
		t.Fatal(err)
	} else if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := direct.ConfigSet(context.Background(), "notify-keyspace-events", "KA").Err(); err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		name      string
		mine, his func(name string) dlock.Locker
	}{
		{"mutex", func(n string) dlock.Locker { return c.Mutex(n) }, func(n string) dlock.Locker { return other.Mutex(n) }},
		{"semaphore", func(n string) dlock.Locker { return c.Semaphore(n, 1) }, func(n string) dlock.Locker { return other.Semaphore(n, 1) }},
		{"rw_read", func(n string) dlock.Locker { return c.RWLock(n).ReadLock() }, func(n string) dlock.Locker { return other.RWLock(n).WriteLock() }},
	}
	for _, sh := range shapes {
		name := "lost-" + sh.name
		events := direct.PSubscribe(context.Background(), "__keyspace@0__:*{"+name+"}*")
		if _, err := events.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := px.Delay(time.Second); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		l, err := sh.mine(name).Acquire(ctx)
		took := time.Since(start)
		cancel()
		report(t, map[string]any{"test": t.Name(), "shape": sh.name, "ctx_deadline_ms": ms(deadline), "returned_after_ms": ms(took)})
		if err == nil {
			t.Fatalf("%s: Acquire whose reply comes after its deadline succeeded (token %d)", sh.name, l.Token())
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Acquire = %v, want an error wrapping context.DeadlineExceeded", sh.name, err)
		}
		if took > deadline+slack {
			t.Errorf("%s: Acquire returned %v after it was called, its ctx's deadline %v", sh.name, took, deadline)
		}
		select {
		case m := <-events.Channel():
			t.Logf("%s: the grant wrote %s (%s)", sh.name, m.Channel, m.Payload)
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no key of the lock was written: Redis never ran the acquire, the test shows nothing", sh.name)
		}
		_ = events.Close()
		if err := px.Heal(); err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
		got := time.Now()
		h, err := sh.his(name).Acquire(actx, dlock.Wait(8*time.Second))
		acancel()
		if err != nil {
			t.Fatalf("%s: another client could not take the lock within 8 s of the cut grant (its lease is 30 s): %v", sh.name, err)
		}
		report(t, map[string]any{"test": t.Name(), "shape": sh.name, "free_after_ms": ms(time.Since(got))})
		if err := h.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	noZombie(t, "client", c)
}

// TestLateGrantsSayWhy delays every reply past the lease (toxiproxy
// latency 1.2 s, lease 1 s): each grant arrives after its lease ran out on
// the client's clock, is given back, and Acquire tries again until its ctx
// ends. The error it returns wraps ctx's error and says why no grant could
// be used; the grants it gave back leave no key held.
func TestLateGrantsSayWhy(t *testing.T) {
	noLeaks(t)
	srv := redistest.Start(t)
	px := newProxy(t, srv.Addr())
	rdb := newRDB(t, px.Addr(), func(o *redis.Options) { o.ReadTimeout = 5 * time.Second })
	c := newClient(t, rdb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := px.Delay(1200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	l, err := c.Mutex("late-why").Acquire(ctx, dlock.LeaseTime(time.Second))
	if err == nil {
		l.Unlock(context.Background())
		t.Fatal("Acquire with every reply later than the lease succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "after their lease ran out") && !strings.Contains(err.Error(), "after its lease ran out") {
		t.Errorf("Acquire = %q: the error does not say that the grants came too late", err)
	}
	if err := px.Heal(); err != nil {
		t.Fatal(err)
	}
	c.Close() // waits for the give-backs still in flight
	if keys := leakedKeys(t, newRDB(t, srv.Addr())); len(keys) > 0 {
		t.Errorf("keys left after the late grants were given back: %v", keys)
	}
}

// TestCancelWithoutDeadline sends Acquire into a black hole with a ctx that
// is cancelled but has no deadline: a round trip in flight ends by the
// client's ReadTimeout (as every go-redis call does), and Acquire then
// returns an error wrapping context.Canceled, not a lease.
func TestCancelWithoutDeadline(t *testing.T) {
	const readTimeout = 500 * time.Millisecond
	noLeaks(t)
	srv := redistest.Start(t)
	px := newProxy(t, srv.Addr())
	rdb := newRDB(t, px.Addr(), func(o *redis.Options) { o.ReadTimeout, o.MaxRetries = readTimeout, -1 })
	c := newClient(t, rdb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := px.Blackhole(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	l, err := c.Mutex("bh-cancel").Acquire(ctx)
	took := time.Since(start)
	if err == nil {
		l.Unlock(context.Background())
		t.Fatal("Acquire through a black hole succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire = %v, want an error wrapping context.Canceled", err)
	}
	if took > readTimeout+leaveGraceSlack {
		t.Errorf("Acquire returned %v after a cancel at 100 ms; the client's ReadTimeout is %v", took, readTimeout)
	}
	report(t, map[string]any{"test": t.Name(), "cancel_at_ms": 100, "read_timeout_ms": ms(readTimeout), "returned_after_ms": ms(took)})
	if err := px.Heal(); err != nil {
		t.Fatal(err)
	}
}

// leaveGraceSlack covers the 200 ms an Acquire whose ctx was cancelled
// waits for its queue place to be left, and scheduling.
const leaveGraceSlack = 600 * time.Millisecond
