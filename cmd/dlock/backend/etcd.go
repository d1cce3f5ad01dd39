package backend

import (
	"context"
	"errors"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/etcdlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
)

const (
	// etcdMinSession is the shortest session etcdlock takes: etcd counts
	// lease TTLs in whole seconds.
	etcdMinSession = time.Second
	// etcdSession is a client's session TTL when none is asked for.
	etcdSession = 2 * time.Second
)

// etcdService is etcd, with etcdlock.
var etcdService = Service{
	Kind: Etcd, Flag: "etcd",
	Servers: "etcd endpoints (host:port,...)", Embedded: "an embedded etcd member", Local: "127.0.0.1:2379",
	Prefix: etcdlock.DefaultPrefix,
	open:   openEtcd,
	check:  func(addr string) error { _, err := splitAddrs(Etcd, addr); return err },
}

// openEtcd opens the etcd cluster at addr, or an embedded single member.
func openEtcd(ctx context.Context, addr string) (*Backend, error) {
	b := &Backend{Kind: Etcd}
	if addr != "" {
		eps, err := splitAddrs(Etcd, addr)
		if err != nil {
			return nil, err
		}
		b.Addr = strings.Join(eps, ",")
		cli, err := dialEtcd(b.Addr)
		if err != nil {
			return nil, badAddress(Etcd, addr, Cause(err, addr))
		}
		defer cli.Close()
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		if _, err := cli.Status(pctx, eps[0]); err != nil {
			return nil, checkFailed(ctx, pctx, Etcd, addr, err)
		}
		b.Desc = "etcd at " + b.Addr
	} else {
		// A fast election lowers etcd's minimum lease TTL to 1 s (it is 1.5
		// election timeouts), so short drill sessions mean what they say.
		c, err := etcdproc.Start(ctx, etcdproc.Options{FastElection: true})
		if err != nil {
			return nil, err
		}
		b.Addr, b.close = c.Members[0].ClientAddr(), c.Close
		b.Desc = "etcd (embedded, " + b.Addr + ", fsync on)"
	}
	eps := b.Addr
	b.newClient = func(_ context.Context, o ClientOptions) (Client, error) {
		ttl := o.Session
		if ttl == 0 {
			ttl = etcdSession
		}
		cli, err := dialEtcd(eps)
		if err != nil {
			return nil, err
		}
		c, err := etcdlock.New(cli, etcdlock.Config{Prefix: o.Prefix, TTL: max(ttl, etcdMinSession), Observer: o.Observer, Label: o.Label})
		if err != nil {
			cli.Close()
			return nil, err
		}
		return &etcdClient{cli: cli, c: c}, nil
	}
	return b, nil
}

// dialEtcd returns a client on the comma-separated endpoints (it connects
// lazily) that logs nothing.
func dialEtcd(eps string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(eps, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// etcdClient is one actor's etcd client and its etcdlock session.
type etcdClient struct {
	cli *clientv3.Client
	c   *etcdlock.Client
}

func (e *etcdClient) Mutex(name string) dlock.Locker { return e.c.Mutex(name) }
func (e *etcdClient) Lock(name string) dlock.Locker  { return e.c.Lock(name) }

func (e *etcdClient) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	return e.c.Inspect(ctx, name)
}

func (e *etcdClient) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return e.c.List(ctx, pattern)
}

func (e *etcdClient) NewLister() Lister { return e.c.NewLister() }

// Session is the TTL in whole seconds, rounded up as etcd counts it.
func (e *etcdClient) Session() time.Duration {
	return (e.c.TTL() + time.Second - 1).Truncate(time.Second)
}

func (e *etcdClient) Close() error { return errors.Join(e.c.Close(), e.cli.Close()) }
