package libs

import (
	"context"
	"errors"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Etcd returns etcd's row: concurrency.Mutex with the library's defaults
// (a session per worker with the default 60 s lease kept alive by the
// client; waiters queue by creation revision and watch their predecessor).
// etcd has no retry knob that changes this, so there is one row.
func Etcd() []Entry {
	return []Entry{{Lib: "etcd", Variant: "Mutex", Setting: "concurrency.Mutex, session TTL 60 s", Client: "etcd", Open: openEtcd}}
}

type etcdInst struct {
	clis []*clientv3.Client
	wait time.Duration

	mu       sync.Mutex
	sessions []*concurrency.Session
}

func openEtcd(_ context.Context, env Env, clients int) (Instance, error) {
	e := &etcdInst{wait: env.Wait}
	for range clients {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			e.Close()
			return nil, err
		}
		e.clis = append(e.clis, cli)
	}
	return e, nil
}

func (e *etcdInst) Worker(i int, name string) (Worker, error) {
	// A Mutex is owned by its session: a session per worker, on the
	// worker's client.
	s, err := concurrency.NewSession(e.clis[i%len(e.clis)])
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.sessions = append(e.sessions, s)
	e.mu.Unlock()
	return &etcdWorker{m: concurrency.NewMutex(s, "/dlockbench/"+name), wait: e.wait}, nil
}

func (e *etcdInst) Close() error {
	var errs []error
	for _, s := range e.sessions {
		errs = append(errs, s.Close())
	}
	for _, c := range e.clis {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type etcdWorker struct {
	m    *concurrency.Mutex
	wait time.Duration
}

func (w *etcdWorker) Lock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.wait)
	defer cancel()
	return w.m.Lock(ctx)
}

func (w *etcdWorker) Unlock(ctx context.Context) error { return w.m.Unlock(ctx) }
