package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/zklock"
)

// A mutex held for a critical section: the section runs under the lease's
// Context, which is cancelled if the lock is lost (the session expired, or
// the client could not reach ZooKeeper for long enough that it might have).
func Example() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181", zklock.Config{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Mutex("orders/42").Acquire(ctx, dlock.Wait(5*time.Second))
	if errors.Is(err, dlock.ErrNotAcquired) {
		log.Print("busy, try later")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	// l.Token() is the node's czxid: pass it to the storage you write.
	fmt.Println("fencing token", l.Token())
	if err := l.Unlock(ctx); errors.Is(err, dlock.ErrLockLost) {
		log.Print("the section ran without exclusivity: reconcile")
	}
}

// A read-write lock: readers share it, a writer waits for everyone queued
// before it.
func ExampleClient_RWLock() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181", zklock.Config{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = dlock.Do(ctx, c.RWLock("catalog").ReadLock(), func(ctx context.Context, l *dlock.Lease) error {
		return nil // read under ctx
	})
	if err != nil {
		log.Print(err)
	}
}

// A semaphore of 3 permits: at most 3 holders at once, across processes.
func ExampleClient_Semaphore() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181", zklock.Config{TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.Semaphore("exports", 3).Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
}

// Several names locked as one: every member or none, whatever order the
// names are given in, with one fencing token.
func ExampleClient_MultiLock() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.MultiLock("account:7", "account:3").Acquire(ctx, dlock.Wait(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	fmt.Println("both accounts, token", l.Token())
}

// Who holds a lock and who waits for it, read without taking it (what
// dlock inspect --backend zookeeper shows).
func ExampleClient_Inspect() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181", zklock.Config{Label: "ops"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	info, err := c.Inspect(ctx, "orders/42")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range info.Holders {
		fmt.Printf("held by %s (%s pid %d) since %v, token %d\n", h.ID, h.Host, h.PID, h.Since, h.Fence)
	}
	fmt.Println(len(info.Queue), "waiting")
}

// A live view of the held locks, as dlock top shows it: a Lister lists
// again and again, reading again only the locks that changed, and says
// what under the root is no lock.
func ExampleLister() {
	ctx := context.Background()
	c, err := zklock.Dial(ctx, "127.0.0.1:2181")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l := c.NewLister()
	defer l.Close()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range 3 {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		infos, err := l.List(lctx, "orders/*")
		cancel()
		if err != nil { // ZooKeeper unreachable: nothing is shown as fresh
			log.Print(err)
		} else {
			for _, info := range infos {
				fmt.Println(info.Name, len(info.Holders), "holders,", len(info.Queue), "waiting")
			}
			if f := l.Foreign(); len(f) > 0 {
				fmt.Println("not locks:", f)
			}
		}
		<-tick.C
	}
}
