package inventory_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/redis/go-redis/v9"
)

// TestPredeductConsumerKilled: a consumer process is killed (SIGKILL) in
// the middle of persisting, between a commit and its XACK; another consumer
// reclaims its pending entries (XAUTOCLAIM) and every pre-deducted unit
// ends up as exactly one SQL order.
func TestPredeductConsumerKilled(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", units)
			s := w.strategy(t, "prededuct", inventory.Options{}, "1001").(*inventory.Prededuct)
			r := sale(ctx, s, "1001", buyers, "pd")
			if r.outcomes[inventory.Sold] != units || len(r.errs) != 0 {
				t.Fatalf("outcomes %v errors %v", r.outcomes, r.errs)
			}

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), childEnv+"=1", childDSN+"="+w.dsn,
				childRedis+"="+w.rdb.Options().Addr, childSKU+"=1001", childName+"=doomed")
			child.Stderr = os.Stderr
			stdout, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- child.Wait() }()
			killed := false
			defer func() {
				if !killed {
					child.Process.Kill()
					<-exited
				}
			}()
			// Kill it right after its second commit, inside the pause that
			// precedes that entry's XACK.
			commits := make(chan string, units)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "committed ") {
						commits <- sc.Text()
					}
				}
				close(commits)
			}()
			for i := range 2 {
				select {
				case _, ok := <-commits:
					if !ok {
						t.Fatalf("the child consumer exited after %d commits", i)
					}
				case <-time.After(60 * time.Second):
					t.Fatalf("the child consumer committed %d entries in 60s", i)
				}
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			killed = true

			stream := "inv:{1001}:orders"
			pend, err := w.rdb.XPending(ctx, stream, inventory.Group).Result()
			if err != nil {
				t.Fatal(err)
			}
			if pend.Consumers["doomed"] == 0 {
				t.Fatalf("the killed consumer left nothing pending (%+v): it was not killed mid-run", pend)
			}
			persisted := count(t, w, `SELECT COUNT(*) FROM orders`)
			if persisted >= units {
				t.Fatalf("the child persisted all %d orders before it was killed", persisted)
			}

			c := s.NewConsumer(inventory.ConsumerOptions{ClaimIdle: 200 * time.Millisecond})
			if err := c.Drain(ctx, "1001"); err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			t.Logf("killed after %d orders with %d pending; the new consumer: %+v", persisted, pend.Count, st)
			if st.Duplicates < 1 {
				t.Errorf("no entry was found committed-but-unacknowledged (stats %+v): the kill did not land between commit and XACK", st)
			}
			if ids := orderRequestIDs(t, w, "1001"); !slices.Equal(ids, r.sold) {
				t.Fatalf("orders %v, want exactly one per pre-deducted request %v", ids, r.sold)
			}
			if pend, _ := w.rdb.XPending(ctx, stream, inventory.Group).Result(); pend.Count != 0 {
				t.Fatalf("entries still pending after the drain: %+v", pend)
			}
			rep, err := s.Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() || rep.Orders != units || rep.RedisQty != 0 {
				t.Fatalf("reconcile: %s", rep)
			}
		})
	}
}

// TestPredeductWarmsUpOnDemand: a missing Redis stock key is never "sold
// out": Buy warms the sku up from the database and sells; a key lost
// mid-sale (the stream still holding orders not yet persisted) is warmed up
// to the database's stock minus those orders; an unknown sku is bad input
// and writes nothing.
func TestPredeductWarmsUpOnDemand(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "sqlite")
	w.addSKU(t, "1001", 3)
	s := w.strategy(t, "prededuct", inventory.Options{}).(*inventory.Prededuct)

	res, err := s.Buy(ctx, "nope", 1, "alice", "r2")
	if !errors.Is(err, inventory.ErrUnknownSKU) || res.Outcome != inventory.Failed {
		t.Fatalf("unknown sku: %+v %v, want ErrUnknownSKU", res, err)
	}
	if n := w.rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys written by a failed request", n)
	}
	res, err = s.Buy(ctx, "1001", 1, "alice", "r1")
	if err != nil || res.Outcome != inventory.Sold || res.Left != 2 {
		t.Fatalf("cold key: %+v %v, want Sold with 2 left (warmed up on demand)", res, err)
	}
	if ok, _ := s.WarmUp(ctx, "1001"); ok {
		t.Fatal("a second warm-up overwrote the stock key")
	}
	if err := w.rdb.Del(ctx, s.StockKey("1001")).Err(); err != nil { // lost mid-sale; r1 still queued
		t.Fatal(err)
	}
	rep, err := s.Reconcile(ctx, "1001")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.RedisMissing || rep.Undersold != 0 || rep.Pending != 1 || rep.Clean() {
		t.Fatalf("reconcile with the key lost: %+v, want redis_missing, not undersold", rep)
	}
	if res, err := s.Buy(ctx, "1001", 1, "bob", "r3"); err != nil || res.Outcome != inventory.Sold || res.Left != 1 {
		t.Fatalf("key lost mid-sale: %+v %v, want Sold with 1 left (3 in SQL - 1 queued - this one)", res, err)
	}
	if res, err := s.Buy(ctx, "1001", 2, "carol", "r4"); err != nil || res.Outcome != inventory.SoldOut {
		t.Fatalf("2 of the last unit: %+v %v, want SoldOut", res, err)
	}
	if err := s.NewConsumer(inventory.ConsumerOptions{}).Drain(ctx, "1001"); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Reconcile(ctx, "1001")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Orders != 2 || rep.Qty != 1 || rep.RedisQty != 1 {
		t.Fatalf("reconcile: %s", rep)
	}
}

// TestPredeductRedisRestartedEmpty: redis-server is killed and started empty
// on the same port while serving. Reconcile says Redis lost its data (not
// "undersold"); a request retried after the loss replays its order; the
// next orders warm the stock up from the database and sell the rest,
// across three replicas (each its own Redis client and consumer), never
// more than the database holds.
func TestPredeductRedisRestartedEmpty(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", 10)
			first := w.strategy(t, "prededuct", inventory.Options{}, "1001").(*inventory.Prededuct)
			for i := range 4 {
				if res, err := first.Buy(ctx, "1001", 1, "early", fmt.Sprint("early-", i)); res.Outcome != inventory.Sold {
					t.Fatalf("before the restart: %+v %v", res, err)
				}
			}
			if err := first.NewConsumer(inventory.ConsumerOptions{}).Drain(ctx, "1001"); err != nil {
				t.Fatal(err)
			}
			if err := w.srv.Restart(); err != nil { // SIGKILL, start again empty on the same port
				t.Fatal(err)
			}
			if n, err := w.rdb.DBSize(ctx).Result(); err != nil || n != 0 {
				t.Fatalf("redis after restart: %d keys, %v; want empty", n, err)
			}
			rep, err := first.Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.RedisMissing || rep.Undersold != 0 || !strings.Contains(strings.Join(rep.Problems, ";"), "lost its data") {
				t.Fatalf("reconcile after the loss: %+v, want redis_missing and no undersale", rep)
			}

			// A request sold before the loss and retried after it replays
			// its order (the warm-up restored the request ids from the
			// database): it does not buy again.
			res, err := first.Buy(ctx, "1001", 1, "early", "early-0")
			if err != nil || res.Outcome != inventory.Sold || !res.Replayed {
				t.Fatalf("retry of a request persisted before the loss: %+v %v, want a replayed sale", res, err)
			}

			// Three replicas sell the 6 units left to 30 buyers while their
			// consumers persist: the first orders warm the stock up again.
			var reps []*inventory.Prededuct
			cctx, stop := context.WithCancel(ctx)
			var consumers sync.WaitGroup
			defer func() { stop(); consumers.Wait() }()
			for i := range 3 {
				rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr()})
				t.Cleanup(func() { rdb.Close() })
				s, err := inventory.NewPrededuct(w.store, rdb, inventory.Options{})
				if err != nil {
					t.Fatal(err)
				}
				reps = append(reps, s)
				c := s.NewConsumer(inventory.ConsumerOptions{Name: fmt.Sprint("c", i), Block: 50 * time.Millisecond})
				consumers.Add(1)
				go func() { defer consumers.Done(); _ = c.Run(cctx, "1001") }()
			}
			var mu sync.Mutex
			outcomes := map[inventory.Outcome]int{}
			var errs []error
			var wg sync.WaitGroup
			for i := range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := reps[i%3].Buy(ctx, "1001", 1, fmt.Sprint("b", i), fmt.Sprint("late-", i))
					mu.Lock()
					defer mu.Unlock()
					outcomes[res.Outcome]++
					if err != nil {
						errs = append(errs, err)
					}
				}()
			}
			wg.Wait()
			if outcomes[inventory.Sold] != 6 || outcomes[inventory.SoldOut] != 24 || len(errs) != 0 {
				t.Fatalf("after the restart: %v, errors %v; want 6 sold and 24 sold out", outcomes, errs)
			}
			stop()
			consumers.Wait()
			if err := reps[0].NewConsumer(inventory.ConsumerOptions{ClaimIdle: 100 * time.Millisecond}).Drain(ctx, "1001"); err != nil {
				t.Fatal(err)
			}
			rep, err = reps[0].Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() || rep.Orders != 10 || rep.Qty != 0 || rep.RedisQty != 0 || rep.Oversold != 0 {
				t.Fatalf("reconcile: %s", rep)
			}
		})
	}
}

// TestPredeductRewarmWhilePersisting: the stock key vanishes while orders
// are queued and consumers are persisting them; replicas warm it up again
// concurrently with the buyers. The warm-up counts each queued order once
// (in the database or in the stream): exactly the stock is sold.
func TestPredeductRewarmWhilePersisting(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			w := newWorld(t, kind)
			const stock = 40
			w.addSKU(t, "1001", stock)
			var reps []*inventory.Prededuct
			for range 3 {
				rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr()})
				t.Cleanup(func() { rdb.Close() })
				s, err := inventory.NewPrededuct(w.store, rdb, inventory.Options{})
				if err != nil {
					t.Fatal(err)
				}
				reps = append(reps, s)
			}
			if _, err := reps[0].WarmUp(ctx, "1001"); err != nil {
				t.Fatal(err)
			}
			for i := range 15 { // queued, not yet persisted
				if res, err := reps[0].Buy(ctx, "1001", 1, "early", fmt.Sprint("early-", i)); res.Outcome != inventory.Sold {
					t.Fatalf("%+v %v", res, err)
				}
			}
			cctx, stop := context.WithCancel(ctx)
			var consumers sync.WaitGroup
			defer func() { stop(); consumers.Wait() }()
			for i, s := range reps {
				c := s.NewConsumer(inventory.ConsumerOptions{Name: fmt.Sprint("c", i), Block: 20 * time.Millisecond, Batch: 1})
				consumers.Add(1)
				go func() { defer consumers.Done(); _ = c.Run(cctx, "1001") }()
			}
			if err := w.rdb.Del(ctx, reps[0].StockKey("1001")).Err(); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			sold := 15
			var errs []error
			var wg sync.WaitGroup
			for i := range 60 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := reps[i%3].Buy(ctx, "1001", 1, fmt.Sprint("b", i), fmt.Sprint("late-", i))
					mu.Lock()
					defer mu.Unlock()
					if res.Outcome == inventory.Sold {
						sold++
					}
					if err != nil {
						errs = append(errs, err)
					}
				}()
			}
			wg.Wait()
			stop()
			consumers.Wait()
			if len(errs) != 0 {
				t.Fatalf("errors: %v", errs)
			}
			if err := reps[0].NewConsumer(inventory.ConsumerOptions{ClaimIdle: 100 * time.Millisecond}).Drain(ctx, "1001"); err != nil {
				t.Fatal(err)
			}
			rep, err := reps[0].Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if sold != stock || !rep.Clean() || rep.Orders != stock || rep.Qty != 0 || rep.RedisQty != 0 {
				t.Fatalf("sold %d of %d; reconcile: %s", sold, stock, rep)
			}
		})
	}
}

// TestPredeductCompensates: an entry whose request id already belongs to
// another order cannot be persisted: its unit goes back to Redis once, it
// is dead-lettered, and a retry of the request says so.
func TestPredeductCompensates(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "sqlite")
	w.addSKU(t, "a", 3)
	w.addSKU(t, "b", 3)
	s := w.strategy(t, "prededuct", inventory.Options{}, "a", "b").(*inventory.Prededuct)
	for _, sku := range []string{"a", "b"} { // the same request id on two skus
		if res, err := s.Buy(ctx, sku, 1, "alice", "same"); res.Outcome != inventory.Sold {
			t.Fatalf("%s: %+v %v", sku, res, err)
		}
	}
	c := s.NewConsumer(inventory.ConsumerOptions{})
	if err := c.Drain(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Applied != 1 || st.Compensated != 1 {
		t.Fatalf("stats %+v, want 1 applied and 1 compensated", st)
	}
	if q := w.rdb.Get(ctx, s.StockKey("b")).Val(); q != "3" {
		t.Fatalf("b's unit was not returned to Redis: %s", q)
	}
	rep, err := s.Reconcile(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeadLetters != 1 || rep.Undersold != 0 || rep.Orders != 0 || rep.Clean() {
		t.Fatalf("reconcile b: %+v", rep)
	}
	if res, err := s.Buy(ctx, "b", 1, "alice", "same"); !errors.Is(err, inventory.ErrNotPersisted) || !res.Replayed {
		t.Fatalf("retry of the compensated request: %+v %v", res, err)
	}
	if err := c.Drain(ctx, "b"); err != nil { // nothing new: compensated once
		t.Fatal(err)
	}
	if q := w.rdb.Get(ctx, s.StockKey("b")).Val(); q != "3" {
		t.Fatalf("compensated twice: %s", q)
	}
}

// TestPredeductReconcileFindsLostEntry: a queued order deleted from the
// stream (a lost message) shows as undersold.
func TestPredeductReconcileFindsLostEntry(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "sqlite")
	w.addSKU(t, "1001", 5)
	s := w.strategy(t, "prededuct", inventory.Options{}, "1001").(*inventory.Prededuct)
	for _, rid := range []string{"r1", "r2"} {
		if res, err := s.Buy(ctx, "1001", 1, "alice", rid); res.Outcome != inventory.Sold {
			t.Fatalf("%+v %v", res, err)
		}
	}
	rep, _ := s.Reconcile(ctx, "1001")
	if rep.Pending != 2 || rep.Clean() || len(rep.Problems) != 0 {
		t.Fatalf("before persisting: %+v", rep)
	}
	msgs, err := w.rdb.XRange(ctx, "inv:{1001}:orders", "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%v %v", msgs, err)
	}
	w.rdb.XDel(ctx, "inv:{1001}:orders", msgs[0].ID)
	if err := s.NewConsumer(inventory.ConsumerOptions{}).Drain(ctx, "1001"); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Reconcile(ctx, "1001")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Undersold != 1 || rep.Orders != 1 || rep.Clean() {
		t.Fatalf("after losing one entry: %+v", rep)
	}
}

// TestPredeductFlushPersistsUnread: a graceful stop's Flush persists the
// entries no consumer has read yet, not only its own pending ones: the
// last replica to stop leaves nothing queued.
func TestPredeductFlushPersistsUnread(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "sqlite")
	w.addSKU(t, "1001", 5)
	s := w.strategy(t, "prededuct", inventory.Options{}, "1001").(*inventory.Prededuct)
	for i := range 3 {
		if res, err := s.Buy(ctx, "1001", 1, "alice", fmt.Sprint("r", i)); res.Outcome != inventory.Sold {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if err := s.NewConsumer(inventory.ConsumerOptions{}).Flush(ctx, "1001"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Reconcile(ctx, "1001")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Orders != 3 || rep.Pending != 0 || !rep.Clean() {
		t.Fatalf("after Flush: %s, want 3 orders and nothing pending", rep)
	}
}
