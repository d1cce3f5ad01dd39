package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The same Locker and Lease as on Redis: only the constructor changes.
func Example() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: server.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	locks, err := New(cli, Config{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer locks.Close() // before cli.Close: revokes the session

	ctx := context.Background()
	err = dlock.Do(ctx, locks.Mutex("example-report"), func(ctx context.Context, l *dlock.Lease) error {
		// ctx is cancelled if the lock is lost; l.Token() fences writes.
		fmt.Println("held, token > 0:", l.Token() > 0)
		return nil
	}, dlock.Wait(5*time.Second))
	fmt.Println("err:", err)
	// Output:
	// held, token > 0: true
	// err: <nil>
}

// IsOwner makes a write in your own etcd transaction conditional on still
// holding the lock.
func ExampleIsOwner() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: server.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	locks, err := New(cli)
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	ctx := context.Background()
	l, err := locks.Mutex("example-config").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	resp, err := cli.Txn(ctx).If(IsOwner(l)).Then(clientv3.OpPut("example/config", "v2")).Commit()
	fmt.Println("written under the lock:", err == nil && resp.Succeeded)
	_ = l.Unlock(ctx)
	resp, err = cli.Txn(ctx).If(IsOwner(l)).Then(clientv3.OpPut("example/config", "v3")).Commit()
	fmt.Println("written after Unlock:", err == nil && resp.Succeeded)
	// Output:
	// written under the lock: true
	// written after Unlock: false
}

// A live view lists the locks every second with a Lister: it reads them
// whole once, then follows etcd's changes.
func ExampleLister() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: server.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	locks, err := New(cli, Config{Prefix: "example-lister/"})
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	ctx := context.Background()
	l, err := locks.Mutex("report").Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer l.Unlock(ctx)
	// A key under the prefix that is no lock's.
	if _, err := cli.Put(ctx, "example-lister/notes", "x"); err != nil {
		panic(err)
	}
	defer cli.Delete(ctx, "example-lister/notes")

	lister := locks.NewLister()
	defer lister.Close()
	for range 2 { // as a view refreshes
		infos, err := lister.List(ctx, "*")
		if err != nil {
			panic(err)
		}
		for _, info := range infos {
			fmt.Println(info.Name, info.Shape, "held by", len(info.Holders))
		}
		fmt.Println("foreign:", lister.Foreign())
	}
	// Output:
	// report mutex held by 1
	// foreign: [notes]
	// report mutex held by 1
	// foreign: [notes]
}
