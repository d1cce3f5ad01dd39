package suite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/dlockgo/dlock/bench/internal/measure"
	"github.com/dlockgo/dlock/bench/internal/servers"
	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/redis/go-redis/v9"
)

// env is the servers of a benchmark run and the harness's own connections.
type env struct {
	redis  []*servers.Redis
	admin  []*redis.Client // one per redis server, for INFO and FLUSHALL
	etcd   *servers.Etcd
	zk     *zkproc.Server
	closed []func() error
}

func startEnv(ctx context.Context, nodes int, etcd, zk bool) (*env, error) {
	e := &env{}
	for range nodes {
		r, err := servers.StartRedis(ctx)
		if err != nil {
			e.close()
			return nil, err
		}
		e.redis = append(e.redis, r)
		e.admin = append(e.admin, redis.NewClient(&redis.Options{Addr: r.Addr}))
	}
	if etcd {
		s, err := servers.StartEtcd(ctx)
		if err != nil {
			e.close()
			return nil, err
		}
		e.etcd = s
	}
	if zk { // one standalone ZooKeeper 3.8, fsync on (its default)
		s, err := zkproc.Start(ctx, zkproc.Options{ForceSync: true})
		if err != nil {
			e.close()
			return nil, err
		}
		e.zk = s
	}
	return e, nil
}

func (e *env) zkAddr() string {
	if e.zk == nil {
		return ""
	}
	return e.zk.Addr()
}

func (e *env) close() error {
	var errs []error
	for _, a := range e.admin {
		errs = append(errs, a.Close())
	}
	for _, r := range e.redis {
		errs = append(errs, r.Close())
	}
	if e.etcd != nil {
		errs = append(errs, e.etcd.Close())
	}
	if e.zk != nil {
		errs = append(errs, e.zk.Close())
	}
	return errors.Join(errs...)
}

func (e *env) addrs(nodes int) []string {
	var a []string
	for _, r := range e.redis[:nodes] {
		a = append(a, r.Addr)
	}
	return a
}

func (e *env) etcdURL() string {
	if e.etcd == nil {
		return ""
	}
	return e.etcd.URL
}

// reset empties the first nodes servers between runs.
func (e *env) reset(ctx context.Context, nodes int) error {
	for _, a := range e.admin[:nodes] {
		if err := a.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("suite: FLUSHALL: %w", err)
		}
	}
	return nil
}

// snapshot is every counter a run reads at the start and end of its window.
type snapshot struct {
	cmds      map[string]int64 // summed over the redis servers in use
	serverCPU time.Duration    // of the servers in use
	clientCPU time.Duration    // of this process
	proc      measure.Process
}

// snap reads the counters of the first nodes redis servers, or of the
// consensus server a row runs on (client "etcd" or "go-zookeeper").
func (e *env) snap(ctx context.Context, nodes int, client string) (snapshot, error) {
	s := snapshot{cmds: map[string]int64{}}
	if pid := e.consensusPID(client); pid != 0 {
		cpu, err := servers.ProcessCPU(pid)
		if err != nil {
			return s, err
		}
		s.serverCPU = cpu
	} else {
		for i, a := range e.admin[:nodes] {
			cmds, err := measure.RedisCommands(ctx, a)
			if err != nil {
				return s, err
			}
			for k, v := range cmds {
				s.cmds[k] += v
			}
			cpu, err := servers.ProcessCPU(e.redis[i].PID())
			if err != nil {
				return s, err
			}
			s.serverCPU += cpu
		}
	}
	s.clientCPU = servers.SelfCPU()
	s.proc = measure.ReadProcess()
	return s, nil
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPU          string `json:"cpu"`
	Cores        int    `json:"cores"`
	GOMAXPROCS   int    `json:"gomaxprocs"`
	OS           string `json:"os"`
	Go           string `json:"go"`
	RedisVersion string `json:"redis_version"`
	LoadAvg      string `json:"loadavg_at_start"`
}

func (e *env) machine(ctx context.Context) Machine {
	m := Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	if len(e.admin) > 0 {
		if info, err := e.admin[0].Info(ctx, "server").Result(); err == nil {
			for _, l := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
					m.RedisVersion = v
				}
			}
		}
	}
	return m
}

// keyBytes sums MEMORY USAGE over every key of the first nodes servers.
func (e *env) keyBytes(ctx context.Context, nodes int) (int64, error) {
	var total int64
	for _, a := range e.admin[:nodes] {
		var cursor uint64
		for {
			keys, next, err := a.Scan(ctx, cursor, "*", 1000).Result()
			if err != nil {
				return total, err
			}
			p := a.Pipeline()
			cmds := make([]*redis.IntCmd, len(keys))
			for i, k := range keys {
				cmds[i] = p.MemoryUsage(ctx, k)
			}
			_, _ = p.Exec(ctx)
			for _, c := range cmds {
				total += c.Val() // 0 for a key gone meanwhile
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return total, nil
}

// flush deletes every key of the first nodes servers.
func (e *env) flush(ctx context.Context, nodes int) error {
	for _, a := range e.admin[:nodes] {
		if err := a.FlushAll(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// consensusPID is the PID of the etcd or ZooKeeper server a row with client
// runs on; 0 for a Redis row.
func (e *env) consensusPID(client string) int {
	switch {
	case client == "etcd" && e.etcd != nil:
		return e.etcd.PID()
	case client == zkClient && e.zk != nil:
		return e.zk.PID()
	}
	return 0
}
