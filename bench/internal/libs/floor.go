package libs

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Floors returns the round-trip floors of an acquire+release pair: two
// PINGs in a row on each client library, with that library's defaults.
func Floors() []Entry {
	return []Entry{
		{Lib: "floor", Variant: "go-redis", Setting: "2×PING, go-redis defaults", Client: "go-redis", Floor: true, Open: openGoRedisFloor},
		{Lib: "floor", Variant: "rueidis", Setting: "2×PING, rueidis defaults", Client: "rueidis", Floor: true, Open: openRueidisFloor},
	}
}

type goRedisFloor struct{ rdbs []*redis.Client }

func openGoRedisFloor(_ context.Context, env Env, clients int) (Instance, error) {
	return &goRedisFloor{rdbs: goRedisClients(env.Redis[0], clients)}, nil
}

func (f *goRedisFloor) Worker(i int, _ string) (Worker, error) {
	return pingWorker{f.rdbs[i%len(f.rdbs)]}, nil
}

func (f *goRedisFloor) Close() error { return closeGoRedis(f.rdbs) }

type pingWorker struct{ rdb *redis.Client }

func (w pingWorker) Lock(ctx context.Context) error   { return w.rdb.Ping(ctx).Err() }
func (w pingWorker) Unlock(ctx context.Context) error { return w.rdb.Ping(ctx).Err() }

type rueidisFloor struct{ cs []rueidis.Client }

func openRueidisFloor(_ context.Context, env Env, clients int) (Instance, error) {
	f := &rueidisFloor{}
	for range clients {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{env.Redis[0]}})
		if err != nil {
			f.Close()
			return nil, err
		}
		f.cs = append(f.cs, c)
	}
	return f, nil
}

func (f *rueidisFloor) Worker(i int, _ string) (Worker, error) {
	c := f.cs[i%len(f.cs)]
	return rueidisPing{c: c, cmd: c.B().Ping().Build().Pin()}, nil
}

func (f *rueidisFloor) Close() error {
	for _, c := range f.cs {
		c.Close()
	}
	return nil
}

type rueidisPing struct {
	c   rueidis.Client
	cmd rueidis.Completed
}

func (w rueidisPing) Lock(ctx context.Context) error   { return w.c.Do(ctx, w.cmd).Error() }
func (w rueidisPing) Unlock(ctx context.Context) error { return w.c.Do(ctx, w.cmd).Error() }

// goRedisClients returns n go-redis clients on addr with the library's
// defaults (pool of 10 connections per GOMAXPROCS, dialled lazily).
func goRedisClients(addr string, n int) []*redis.Client {
	rdbs := make([]*redis.Client, n)
	for i := range rdbs {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: addr})
	}
	return rdbs
}

func closeGoRedis(rdbs []*redis.Client) error {
	var cs closers
	for _, r := range rdbs {
		cs = append(cs, r.Close)
	}
	return cs.close()
}
