package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/zkproc"
)

// ensembleTick is the ZooKeeper ensemble's tick: sessions of 1 to 10 s can
// be negotiated (2 to 20 ticks).
const ensembleTick = 500 * time.Millisecond

func init() {
	startEnsemble[backend.Etcd] = startEtcdEnsemble
	startEnsemble[backend.ZooKeeper] = startZKEnsemble
}

// clientProxies puts a cuttable proxy in front of every member's client
// address: the clients connect through them, so a partition can cut a
// member's clients off.
type clientProxies []*etcdproc.Proxy

func newClientProxies(addrs []string) (clientProxies, error) {
	var ps clientProxies
	for _, a := range addrs {
		p, err := etcdproc.NewProxy(a)
		if err != nil {
			ps.close()
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func (ps clientProxies) addr() string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return strings.Join(out, ",")
}

func (ps clientProxies) close() error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// etcdEnsemble is a 3-member etcd cluster (etcd's default heartbeat and
// election timeout, fsync on).
type etcdEnsemble struct {
	c  *etcdproc.Cluster
	px clientProxies
}

func startEtcdEnsemble(ctx context.Context, dir string) (ensemble, error) {
	c, err := etcdproc.StartCluster(ctx, 3, etcdproc.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(c.Members))
	for i, m := range c.Members {
		addrs[i] = m.ClientAddr()
	}
	px, err := newClientProxies(addrs)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &etcdEnsemble{c: c, px: px}, nil
}

func (e *etcdEnsemble) Addr() string { return e.px.addr() }

func (e *etcdEnsemble) Leader(ctx context.Context) (int, error) {
	m, err := e.c.Leader(ctx)
	if err != nil {
		return -1, err
	}
	for i, x := range e.c.Members {
		if x == m {
			return i, nil
		}
	}
	return -1, fmt.Errorf("etcd leader %s is not a member", m.Name())
}

func (e *etcdEnsemble) Kill(i int) error                         { return e.c.Members[i].Kill() }
func (e *etcdEnsemble) Restart(ctx context.Context, i int) error { return e.c.Members[i].Restart(ctx) }
func (e *etcdEnsemble) Pause(i int) error                        { return e.c.Members[i].Pause() }
func (e *etcdEnsemble) Resume(i int) error                       { return e.c.Members[i].Resume() }
func (e *etcdEnsemble) Partition(i int) error                    { e.px[i].Cut(); return nil }
func (e *etcdEnsemble) Heal(i int) error                         { e.px[i].Heal(); return nil }

func (e *etcdEnsemble) Close() error { return errors.Join(e.px.close(), e.c.Close()) }

// zkEnsemble is a 3-server ZooKeeper ensemble (forceSync on).
type zkEnsemble struct {
	e  *zkproc.Ensemble
	px clientProxies
}

func startZKEnsemble(ctx context.Context, dir string) (ensemble, error) {
	e, err := zkproc.StartEnsemble(ctx, 3, zkproc.Options{Dir: dir, ForceSync: true, TickTime: ensembleTick})
	if err != nil {
		return nil, err
	}
	px, err := newClientProxies(e.Addrs())
	if err != nil {
		e.Close()
		return nil, err
	}
	return &zkEnsemble{e: e, px: px}, nil
}

func (z *zkEnsemble) Addr() string { return z.px.addr() }

func (z *zkEnsemble) Leader(ctx context.Context) (int, error) {
	s, err := z.e.Leader(ctx)
	if err != nil {
		return -1, err
	}
	for i, x := range z.e.Servers {
		if x == s {
			return i, nil
		}
	}
	return -1, fmt.Errorf("zookeeper leader %s is not a server", s.Addr())
}

func (z *zkEnsemble) Kill(i int) error                         { return z.e.Servers[i].Kill() }
func (z *zkEnsemble) Restart(ctx context.Context, i int) error { return z.e.Servers[i].Restart(ctx) }
func (z *zkEnsemble) Pause(i int) error                        { return z.e.Servers[i].Pause() }
func (z *zkEnsemble) Resume(i int) error                       { return z.e.Servers[i].Resume() }
func (z *zkEnsemble) Partition(i int) error                    { z.px[i].Cut(); return nil }
func (z *zkEnsemble) Heal(i int) error                         { z.px[i].Heal(); return nil }

func (z *zkEnsemble) Close() error { return errors.Join(z.px.close(), z.e.Close()) }
