package libs

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock/zklock"
)

// zkSession is the session timeout both ZooKeeper rows ask for.
const zkSession = 10 * time.Second

// ZooKeeper returns ZooKeeper's rows against the server of the run
// (Env.ZooKeeper): dlock's zklock Mutex and go-zookeeper's own zk.Lock recipe,
// both with a 10 s session. Both queue ephemeral sequential nodes and watch
// the predecessor; zk.Lock has no wait bound and no lost-lock signal.
func ZooKeeper() []Entry {
	return []Entry{
		{Lib: "zklock", Variant: "Mutex", Setting: "session 10 s, heartbeat every 1/3", Client: "go-zookeeper",
			Open: func(ctx context.Context, env Env, clients int) (Instance, error) {
				return openZklock(ctx, env.ZooKeeper, env, clients)
			}},
		{Lib: "zk.Lock", Variant: "recipe", Setting: "go-zookeeper zk.NewLock, session 10 s", Client: "go-zookeeper",
			Open: func(ctx context.Context, env Env, clients int) (Instance, error) {
				return openZkRecipe(env.ZooKeeper, env, clients)
			}},
	}
}

type zklockInst struct {
	cs   []*zklock.Client
	wait time.Duration
}

func openZklock(ctx context.Context, addrs string, env Env, clients int) (Instance, error) {
	z := &zklockInst{wait: env.Wait}
	for range clients {
		c, err := zklock.Dial(ctx, addrs, zklock.Config{TTL: zkSession})
		if err != nil {
			z.Close()
			return nil, err
		}
		z.cs = append(z.cs, c)
	}
	return z, nil
}

func (z *zklockInst) Worker(i int, name string) (Worker, error) {
	return &leaseWorker{lk: z.cs[i%len(z.cs)].Mutex("dlockbench/" + name), wait: z.wait}, nil
}

func (z *zklockInst) Close() error {
	var errs []error
	for _, c := range z.cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type zkRecipeInst struct {
	conns []*zk.Conn
	wait  time.Duration
}

func openZkRecipe(addrs string, env Env, clients int) (Instance, error) {
	z := &zkRecipeInst{wait: env.Wait}
	for range clients {
		conn, events, err := zk.Connect(strings.Split(addrs, ","), zkSession, zk.WithLogInfo(false))
		if err != nil {
			z.Close()
			return nil, err
		}
		go func() {
			for range events {
			}
		}()
		z.conns = append(z.conns, conn)
	}
	return z, nil
}

func (z *zkRecipeInst) Worker(i int, name string) (Worker, error) {
	return &zkRecipeWorker{conn: z.conns[i%len(z.conns)], path: "/zkrecipe/" + name, wait: z.wait}, nil
}

func (z *zkRecipeInst) Close() error {
	for _, c := range z.conns {
		c.Close()
	}
	return nil
}

type zkRecipeWorker struct {
	conn *zk.Conn
	path string
	wait time.Duration
	l    *zk.Lock
}

// Lock runs zk.Lock.Lock, which cannot be bounded: past the wait it
// reports ErrWaitTimeout and a goroutine unlocks the lock once it comes.
func (w *zkRecipeWorker) Lock(ctx context.Context) error {
	l := zk.NewLock(w.conn, w.path, zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	t := time.NewTimer(w.wait)
	defer t.Stop()
	select {
	case err := <-done:
		w.l = l
		return err
	case <-t.C:
	case <-ctx.Done():
	}
	go func() {
		if <-done == nil {
			l.Unlock()
		}
	}()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return ErrWaitTimeout
}

func (w *zkRecipeWorker) Unlock(context.Context) error { return w.l.Unlock() }
