package backend

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/dlockgo/dlock/zklock"
)

const (
	// zkTick is the embedded server's tick: it grants sessions of 2 to 20
	// ticks (200 ms to 2 s).
	zkTick = 100 * time.Millisecond
	// zkSession is a client's session timeout when none is asked for.
	zkSession = 2 * time.Second
)

// zooKeeperService is ZooKeeper, with zklock.
var zooKeeperService = Service{
	Kind: ZooKeeper, Flag: "zk",
	Servers: "ZooKeeper servers (host:port,...)", Embedded: "an embedded ZooKeeper server", Local: "127.0.0.1:2181",
	Prefix: zklock.DefaultPrefix,
	open:   openZooKeeper,
	check:  func(addr string) error { _, err := splitAddrs(ZooKeeper, addr); return err },
}

// openZooKeeper opens the ZooKeeper servers at addr, or an embedded one.
func openZooKeeper(ctx context.Context, addr string) (*Backend, error) {
	b := &Backend{Kind: ZooKeeper}
	if addr != "" {
		addrs, err := splitAddrs(ZooKeeper, addr)
		if err != nil {
			return nil, err
		}
		b.Addr = strings.Join(addrs, ",")
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		c, err := zklock.Dial(pctx, b.Addr, zklock.Config{TTL: zkSession})
		if err != nil {
			return nil, checkFailed(ctx, pctx, ZooKeeper, addr, err)
		}
		c.Close()
		b.Desc = "zookeeper at " + b.Addr
	} else {
		s, err := zkproc.Start(ctx, zkproc.Options{TickTime: zkTick, ForceSync: true})
		if err != nil {
			return nil, err
		}
		b.Addr, b.close = s.Addr(), s.Close
		b.Desc = fmt.Sprintf("zookeeper (embedded, %s, tick %v, forceSync on)", s.Addr(), zkTick)
	}
	servers := b.Addr
	b.newClient = func(ctx context.Context, o ClientOptions) (Client, error) {
		session := o.Session
		if session == 0 {
			session = zkSession
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := zklock.Dial(dctx, servers, zklock.Config{Prefix: o.Prefix, TTL: session, Observer: o.Observer, Label: o.Label})
		if err != nil {
			return nil, err
		}
		return zkClient{c}, nil
	}
	return b, nil
}

// zkClient is one actor's ZooKeeper session.
type zkClient struct{ c *zklock.Client }

func (z zkClient) Mutex(name string) dlock.Locker { return z.c.Mutex(name) }
func (z zkClient) Lock(name string) dlock.Locker  { return z.c.Lock(name) }
func (z zkClient) Close() error                   { return z.c.Close() }
func (z zkClient) Session() time.Duration         { return z.c.TTL() }

func (z zkClient) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	return z.c.Inspect(ctx, name)
}

func (z zkClient) NewLister() Lister { return z.c.NewLister() }

func (z zkClient) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return z.c.List(ctx, pattern)
}
