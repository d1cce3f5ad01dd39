package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
)

// The code of README.md and docs/LOCKS.md, compiled here (TestDocsCode checks
// that every Go block of the docs appears in a test file) and, for buy, run.

// ErrSoldOut and ErrBusy are the two answers of buy that are not failures of
// the system.
var (
	ErrSoldOut = errors.New("sold out")
	ErrBusy    = errors.New("busy: try again")
)

// buy takes n units of sku under the SKU's lock. locks is the one dlock Client
// of the service's go-redis client: dlock.New(rdb), closed at shutdown.
func buy(ctx context.Context, locks *dlock.Client, sku string, n int) error {
	err := dlock.Do(ctx, locks.Lock("stock:"+sku), func(ctx context.Context, l *dlock.Lease) error {
		// ctx is cancelled (cause ErrLockLost) the moment the lock is lost: pass it down.
		qty, err := readStock(ctx, sku)
		if err != nil {
			return err
		}
		if qty < n {
			return ErrSoldOut
		}
		if err := l.Verify(ctx); err != nil { // check before commit
			return err
		}
		return writeStock(ctx, sku, qty-n, l.Token()) // storage rejects tokens older than one it has seen
	}, dlock.Wait(3*time.Second)) // no LeaseTime: the watchdog keeps the lock
	switch {
	case errors.Is(err, dlock.ErrNotAcquired):
		return ErrBusy // the degraded path, designed up front
	case errors.Is(err, dlock.ErrLockLost):
		return reconcile(ctx, sku, err) // ran without exclusivity
	}
	return err
}

// The shop's storage of the example: a stock row per SKU that keeps the
// highest token it accepted (package fence does this in SQL and in Redis).
var (
	stockMu    sync.Mutex
	stockQty   = map[string]int{"1001": 3}
	stockFence = map[string]int64{}
)

func readStock(ctx context.Context, sku string) (int, error) {
	stockMu.Lock()
	defer stockMu.Unlock()
	return stockQty[sku], ctx.Err()
}

func writeStock(ctx context.Context, sku string, qty int, token int64) error {
	stockMu.Lock()
	defer stockMu.Unlock()
	if token < stockFence[sku] {
		return fmt.Errorf("stock %s: token %d is older than %d", sku, token, stockFence[sku])
	}
	stockQty[sku], stockFence[sku] = qty, token
	return ctx.Err()
}

func reconcile(_ context.Context, sku string, cause error) error {
	return fmt.Errorf("stock %s needs a recount: %w", sku, cause)
}

// Example_buy runs the README's twenty lines: two buys of 2 units from a stock
// of 3; the second is refused with ErrSoldOut, and the stock is left at 1.
func Example_buy() {
	rdb := exampleRedis()
	defer rdb.Close()
	locks, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	ctx := context.Background()
	fmt.Println(buy(ctx, locks, "1001", 2))
	fmt.Println(buy(ctx, locks, "1001", 2))
	qty, _ := readStock(ctx, "1001")
	fmt.Println("left:", qty)
	// Output:
	// <nil>
	// sold out
	// left: 1
}

// shapes acquires one lock of each further Redis shape (docs/LOCKS.md, "The
// lock family"): c1, c2 and c3 are Clients on three independent Redis masters.
func shapes(ctx context.Context, locks, c1, c2, c3 *dlock.Client) error {
	for _, lock := range []dlock.Locker{
		locks.FairLock("ticket:42"),                  // FIFO, handed over server-side
		locks.RWLock("config:pricing").ReadLock(),    // readers share
		locks.MultiLock("stock:1002", "stock:1001"),  // all or nothing
		dlock.NewRedLock("report:daily", c1, c2, c3), // a majority of independent masters
		locks.Semaphore("exports", 3),                // at most 3 at once
	} {
		l, err := lock.Acquire(ctx, dlock.Wait(5*time.Second))
		if err != nil {
			return err
		}
		defer l.Unlock(ctx)
	}
	return nil
}

func Example_shapes() {
	clients, done := exampleClients(4)
	defer done()
	fmt.Println(shapes(context.Background(), clients[0], clients[1], clients[2], clients[3]))
	// Output: <nil>
}

func Example_docsLocks() {
	clients, done := exampleClients(6)
	defer done()
	c := clients
	fmt.Println(docsLocks(context.Background(), c[0], c[1], c[2], c[3], c[4], c[5], "0123456789abcdef0123456789abcdef"))
	// Output: <nil>
}

// exampleClients returns n Clients on the examples' Redis, each with a
// prefix of its own (as many independent lock services), and a function
// that closes them.
func exampleClients(n int) ([]*dlock.Client, func()) {
	rdb := exampleRedis()
	var clients []*dlock.Client
	for i := range n {
		c, err := dlock.New(rdb, dlock.Config{Prefix: fmt.Sprintf("node%d:", i)})
		if err != nil {
			panic(err)
		}
		clients = append(clients, c)
	}
	return clients, func() {
		for _, c := range clients {
			_ = c.Close()
		}
		_ = rdb.Close()
	}
}

// docsLocks holds the code of docs/LOCKS.md, one block per shape.
func docsLocks(ctx context.Context, locks, c1, c2, c3, c4, c5 *dlock.Client, permitID string) error {
	{
		l, err := locks.FairLock("ticket:42").Acquire(ctx, dlock.Wait(10*time.Second))
		if err != nil {
			return err
		}
		defer l.Unlock(ctx)
	}
	{
		rw := locks.RWLock("config:pricing")
		r, err := rw.ReadLock().Acquire(ctx) // shared
		if err != nil {
			return err
		}
		if err := r.Unlock(ctx); err != nil {
			return err
		}
		w, err := rw.WriteLock().Acquire(ctx) // exclusive
		if err != nil {
			return err
		}
		defer w.Unlock(ctx)
	}
	{
		l, err := locks.MultiLock("stock:1002", "stock:1001").Acquire(ctx, dlock.Wait(3*time.Second))
		if err != nil {
			return err
		}
		defer l.Unlock(ctx)
	}
	{
		l, err := dlock.NewRedLock("report:daily", c1, c2, c3, c4, c5).Acquire(ctx, dlock.Wait(time.Second))
		if err != nil {
			return err
		}
		defer l.Unlock(ctx)
	}
	{
		sem := locks.Semaphore("exports", 3)
		l, err := sem.Acquire(ctx, dlock.Wait(5*time.Second)) // one permit
		if err != nil {
			return err
		}
		defer l.Unlock(ctx)
		ls, err := sem.AcquireN(ctx, 2) // two permits, one Lease each
		if err != nil {
			return err
		}
		for _, l := range ls {
			defer l.Unlock(ctx)
		}
		err = sem.Release(ctx, permitID) // a permit whose Lease is out of reach
		if err != nil && !errors.Is(err, dlock.ErrNotHeld) {
			return err
		}
	}
	return nil
}
