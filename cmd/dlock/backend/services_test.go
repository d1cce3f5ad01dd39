package backend_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/etcdlock"
	"github.com/dlockgo/dlock/zklock"
)

// sameLockEverywhere is docs/BACKENDS.md's first block: one constructor
// per service, the same Locker and Lease from each.
func sameLockEverywhere(ctx context.Context, rdb *redis.Client, cli *clientv3.Client, zkServers string) error {
	onRedis, err := dlock.New(rdb) // Redis: a go-redis client (standalone, Sentinel or Cluster)
	if err != nil {
		return err
	}
	defer onRedis.Close()
	onEtcd, err := etcdlock.New(cli) // etcd: a go.etcd.io/etcd/client/v3 client; module etcdlock
	if err != nil {
		return err
	}
	defer onEtcd.Close()
	onZK, err := zklock.Dial(ctx, zkServers, zklock.Config{}) // ZooKeeper 3.8, "zk1:2181,zk2:2181"; module zklock
	if err != nil {
		return err
	}
	defer onZK.Close()
	for _, m := range []dlock.Locker{onRedis.Mutex("orders/42"), onEtcd.Mutex("orders/42"), onZK.Mutex("orders/42")} {
		l, err := m.Acquire(ctx) // Mutex, Lock, RWLock, Semaphore, MultiLock: on all three
		if err != nil {
			return err
		}
		if err := l.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

func TestSameLockEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and ZooKeeper")
	}
	r, e, z := open(t, backend.Redis, ""), open(t, backend.Etcd, ""), open(t, backend.ZooKeeper, "")
	o, err := redis.ParseURL(r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(e.Addr, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sameLockEverywhere(ctx, rdb, cli, z.Addr); err != nil {
		t.Fatal(err)
	}
}
