package etcdlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcd-io/etcd#17470: the session lease is not kept alive once its client
// is gone — killed, its etcd client closed, or closed.

const helperEnv = "ETCDLOCK_TEST_HOLDER" // endpoint|lock name: run as the holder process

// holderProcess is the process TestKilledHolderFreesLock kills (TestMain
// runs it when helperEnv is set): it takes the lock, says so, and waits.
func holderProcess(spec string) {
	endpoint, name, _ := strings.Cut(spec, "|")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		var c *Client
		if c, err = New(cli, Config{TTL: 2 * time.Second}); err == nil {
			_, err = c.Mutex(name).Acquire(context.Background())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("held")
	select {}
}

// startHolderProcess starts a process that takes name's Mutex (TTL 2 s)
// and waits; stop kills it, by the pid of the process the test started.
func startHolderProcess(t *testing.T, name string) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+server.Endpoints()[0]+"|"+name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "held" {
				held <- true
				return
			}
		}
		held <- false
	}()
	select {
	case ok := <-held:
		if !ok {
			t.Fatal("the holder process ended without taking the lock")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the holder process did not take the lock")
	}
	return stop
}

// A killed holder's lock comes free once its session lease has expired
// and its lock-delay has passed (nobody is left to say it was told).
func TestKilledHolderFreesLock(t *testing.T) {
	n := lockName(t)
	stop := startHolderProcess(t, n)
	b := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the lock is free while its holder lives: %v", err)
	}
	stop()
	killed := time.Now()
	l, err := b.Mutex(n).Acquire(ctx, dlock.Wait(15*time.Second))
	if err != nil {
		t.Fatalf("the killed holder's lease is still kept: %v", err)
	}
	d := time.Since(killed)
	// TTL 2 s (etcd checks expiries every 500 ms), then the lock-delay: the
	// holder's keep, 1.6 s (TTL less 2/5 of the 1 s minimum TTL), + drift.
	t.Logf("granted %v after the holder was killed (TTL 2 s, lock-delay 1.6 s)", d.Round(time.Millisecond))
	if d > 8*time.Second {
		t.Fatalf("granted %v after the kill; the TTL is 2 s and the lock-delay 1.6 s", d)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Client whose etcd client was closed under it stops renewing: its
// holder is told, and the lock frees when the TTL runs out — the holder
// first.
func TestClosedEtcdClientStopsRenewing(t *testing.T) {
	cli := etcdClient(t)
	a, err := New(cli, Config{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	l, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan time.Time, 1)
	go func() {
		<-l.Done()
		told <- time.Now()
	}()
	cli.Close()
	got, err := b.Mutex(n).Acquire(ctx, dlock.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("the lock of a client whose etcd client closed never freed: %v", err)
	}
	granted := time.Now()
	defer got.Unlock(ctx)
	select {
	case at := <-told:
		if at.After(granted) {
			t.Fatalf("holder told at %v, after the next grant at %v", at, granted)
		}
	default:
		t.Fatal("the holder was not told before the next grant")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err: %v, want ErrLockLost", err)
	}
}

// Close revokes the session: the lock is free at once, not after the TTL.
func TestCloseRevokesSession(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	if _, err := a.Mutex(n).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	id := a.sessionID()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if leaseAlive(t, admin, id) {
		t.Fatal("the session lease outlived Close")
	}
	l, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("the lock of a closed client is not free at once: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
