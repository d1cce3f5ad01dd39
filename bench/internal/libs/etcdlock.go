package libs

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/etcdlock"
)

// EtcdLock returns dlock's rows on etcd: etcdlock's Mutex and reentrant
// Lock with the package's defaults (one session lease per Client, TTL 10 s
// renewed every 3.3 s; waiters queue by create revision and watch the key
// in front of them).
func EtcdLock() []Entry {
	return []Entry{
		etcdLockEntry("etcd Mutex", "etcdlock, session TTL 10 s", func(c *etcdlock.Client, name string) dlock.Locker { return c.Mutex(name) }),
		etcdLockEntry("etcd Lock", "etcdlock reentrant, session TTL 10 s", func(c *etcdlock.Client, name string) dlock.Locker { return c.Lock(name) }),
	}
}

func etcdLockEntry(variant, setting string, shape func(*etcdlock.Client, string) dlock.Locker) Entry {
	return Entry{Lib: "dlock", Variant: variant, Setting: setting, Client: "etcd",
		Open: func(_ context.Context, env Env, clients int) (Instance, error) {
			return openEtcdLock(env, clients, shape)
		}}
}

type etcdLockInst struct {
	clis  []*clientv3.Client
	cs    []*etcdlock.Client
	shape func(*etcdlock.Client, string) dlock.Locker
	wait  time.Duration
}

func openEtcdLock(env Env, clients int, shape func(*etcdlock.Client, string) dlock.Locker) (Instance, error) {
	e := &etcdLockInst{shape: shape, wait: env.Wait}
	var cfg etcdlock.Config
	if env.Lease >= time.Second {
		cfg.TTL = env.Lease
	}
	for range clients {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			e.Close()
			return nil, err
		}
		e.clis = append(e.clis, cli)
		c, err := etcdlock.New(cli, cfg)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.cs = append(e.cs, c)
	}
	return e, nil
}

func (e *etcdLockInst) Worker(i int, name string) (Worker, error) {
	return &leaseWorker{lk: e.shape(e.cs[i%len(e.cs)], name), wait: e.wait}, nil
}

func (e *etcdLockInst) Close() error {
	var errs []error
	for _, c := range e.cs { // before their etcd clients: Close revokes the session
		errs = append(errs, c.Close())
	}
	for _, cli := range e.clis {
		errs = append(errs, cli.Close())
	}
	return errors.Join(errs...)
}
