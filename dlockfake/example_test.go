package dlockfake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/observe"
)

// A fixed lease runs out when the test moves the clock past it; a lock
// lost on cue tells its holder at once.
func Example() {
	svc := dlockfake.New()
	c, _ := svc.NewClient()
	defer c.Close()
	ctx := context.Background()

	report, _ := c.Lock("report:daily").Acquire(ctx, dlock.LeaseTime(time.Minute))
	svc.Advance(59 * time.Second)
	fmt.Println("at 59 s:", report.Err())
	svc.Advance(time.Second)
	fmt.Println("at 60 s:", report.Err())

	stock, _ := c.Lock("stock:1001").Acquire(ctx)
	svc.Lose("stock:1001", observe.LostUnreachable)
	<-stock.Done()
	fmt.Println(context.Cause(stock.Context()))
	// Output:
	// at 59 s: <nil>
	// at 60 s: dlock: hold lock "report:daily": lock lost (expired)
	// dlock: hold lock "stock:1001": lock lost (unreachable)
}

// Another process holds the lock: a try is refused, a wait ends when the
// test moves the clock past it, and the lock is granted once released.
func ExampleService_Take() {
	svc := dlockfake.New()
	c, _ := svc.NewClient()
	defer c.Close()
	ctx := context.Background()

	release, _ := svc.Take("stock:1001")
	_, err := c.Lock("stock:1001").Acquire(ctx, dlock.Wait(0))
	fmt.Println(err)

	done := make(chan error, 1)
	go func() {
		_, err := c.Lock("stock:1001").Acquire(ctx, dlock.Wait(3*time.Second))
		done <- err
	}()
	svc.AwaitWaiters(ctx, "stock:1001", 1)
	svc.Advance(3 * time.Second)
	fmt.Println(<-done)

	release()
	l, err := c.Lock("stock:1001").Acquire(ctx, dlock.Wait(0))
	fmt.Println(l.Token(), err)
	// Output:
	// dlock: acquire lock "stock:1001": not acquired
	// dlock: acquire lock "stock:1001": not acquired
	// 2 <nil>
}

// Renewals that fail lose the lease at its deadline, as on Redis: the
// holder is told before the Service lets anyone else in.
func ExampleService_FailRenewals() {
	svc := dlockfake.New()
	a, _ := svc.NewClient(dlockfake.Config{Label: "a"})
	b, _ := svc.NewClient(dlockfake.Config{Label: "b"})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	l, _ := a.Lock("leader").Acquire(ctx) // renewed every 10 s, kept 30 s
	svc.FailRenewals("leader", 2)
	svc.Advance(30 * time.Second)
	fmt.Println(l.Err())
	for _, e := range svc.Record() {
		fmt.Println(e)
	}
	_, err := b.Lock("leader").Acquire(ctx, dlock.Wait(time.Second))
	fmt.Println(err)
	// Output:
	// dlock: hold lock "leader": lock lost (unreachable)
	// a acquire lock "leader" token 1
	// a renew lock "leader" token 1: dlock: the lock service did not answer (an injected fault)
	// a renew lock "leader" token 1: dlock: the lock service did not answer (an injected fault)
	// a lost lock "leader" token 1 (unreachable)
	// <nil>
}

// A paused process (a GC pause, SIGSTOP) does not see its lease run out;
// another is granted the lock meanwhile, with a greater token, and the
// paused one is told only when it resumes: fence the storage with the
// token.
func ExampleClient_Pause() {
	svc := dlockfake.New()
	a, _ := svc.NewClient(dlockfake.Config{Label: "a"})
	b, _ := svc.NewClient(dlockfake.Config{Label: "b"})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	la, _ := a.Mutex("job").Acquire(ctx, dlock.LeaseTime(10*time.Second))
	a.Pause()
	svc.Advance(time.Minute)
	lb, _ := b.Mutex("job").Acquire(ctx, dlock.Wait(0))
	fmt.Println("a holds", la.Token(), la.Err(), "- b holds", lb.Token(), lb.Err())
	a.Resume()
	fmt.Println(errors.Is(la.Err(), dlock.ErrLockLost))
	// Output:
	// a holds 1 <nil> - b holds 2 <nil>
	// true
}
