package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// setupTimeout caps how long StartSentinel and StartCluster wait for the
// servers to find each other once they are all running.
const setupTimeout = 20 * time.Second

// SentinelOptions configures StartSentinel. Zero values pick the defaults.
type SentinelOptions struct {
	Replicas        int           // replicas of the master; default 1
	Sentinels       int           // Sentinel processes; default 3
	MasterName      string        // default "mymaster"
	DownAfter       time.Duration // down-after-milliseconds; default 1s
	FailoverTimeout time.Duration // failover-timeout; default 3s
	MasterArgs      []string      // extra redis-server arguments for the master
	ReplicaArgs     []string      // extra redis-server arguments for each replica
	Dir             string        // parent of the setup's temporary directory
	// Route, if set, returns the address at which the replicas (role
	// "replica") and the Sentinels (role "sentinel") reach the master, such
	// as a fault-injecting proxy in front of it; default the master's own.
	Route func(role, master string) (string, error)
}

// Sentinel is a master, its replicas and the Sentinels monitoring them.
type Sentinel struct {
	MasterName string
	Master     *Server // the original master; after a failover it may be a replica or dead
	Replicas   []*Server
	Sentinels  []*Server

	dir string
}

// StartSentinel starts a master, o.Replicas replicas of it and o.Sentinels
// Sentinels with a majority quorum. It returns once every replica is online
// at the master and every Sentinel reports the master as up with all
// replicas and all other Sentinels known. Sentinels announce 127.0.0.1,
// do not resolve hostnames, and keep their config file (rewritten by
// Sentinel) in their Dir. All servers replicate diskless without delay.
// On error everything already started is closed.
func StartSentinel(ctx context.Context, o SentinelOptions) (*Sentinel, error) {
	s, err := newSentinel(&o)
	if err != nil {
		return nil, err
	}
	dir := s.dir
	fail := func(err error) (*Sentinel, error) {
		s.Close()
		return nil, err
	}
	repl := []string{"--repl-diskless-sync-delay", "0"}
	if s.Master, err = Start(ctx, Options{Dir: dir, Args: slices.Concat(repl, o.MasterArgs)}); err != nil {
		return fail(err)
	}
	route := func(role string) (int, error) {
		if o.Route == nil {
			return s.Master.Port(), nil
		}
		via, err := o.Route(role, s.Master.Addr())
		if err != nil {
			return 0, err
		}
		_, port, err := net.SplitHostPort(via)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(port)
	}
	replicaPort, err := route("replica")
	if err != nil {
		return fail(err)
	}
	sentinelPort, err := route("sentinel")
	if err != nil {
		return fail(err)
	}
	replicaOf := []string{"--replicaof", "127.0.0.1", strconv.Itoa(replicaPort)}
	for range o.Replicas {
		r, err := Start(ctx, Options{Dir: dir, Args: slices.Concat(repl, replicaOf, o.ReplicaArgs)})
		if err != nil {
			return fail(err)
		}
		s.Replicas = append(s.Replicas, r)
	}

	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	// Sentinels learn the replicas from the master's INFO when they first
	// connect, so let the replicas sync before starting them.
	if err := s.waitReplicas(ctx, o.Replicas); err != nil {
		return fail(err)
	}
	if err := s.startSentinels(ctx, o, sentinelPort); err != nil {
		return fail(err)
	}
	return s, nil
}

// StartSentinels starts o.Sentinels Sentinels, with a majority quorum,
// monitoring a master the caller runs: it listens on 127.0.0.1:masterPort
// (as the Sentinels and their clients reach it) and has o.Replicas replicas
// online (default 1). It returns once every Sentinel reports the master up with all
// replicas and all other Sentinels known. The result's Master and Replicas
// are nil (the caller owns those servers); Close closes the Sentinels.
// o.MasterArgs, o.ReplicaArgs and o.Route are not used.
func StartSentinels(ctx context.Context, o SentinelOptions, masterPort int) (*Sentinel, error) {
	s, err := newSentinel(&o)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := s.startSentinels(ctx, o, masterPort); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newSentinel fills in o's defaults and returns an empty setup with its
// temporary directory.
func newSentinel(o *SentinelOptions) (*Sentinel, error) {
	o.Replicas = orDefault(o.Replicas, 1)
	o.Sentinels = orDefault(o.Sentinels, 3)
	o.MasterName = orDefault(o.MasterName, "mymaster")
	o.DownAfter = orDefault(o.DownAfter, time.Second)
	o.FailoverTimeout = orDefault(o.FailoverTimeout, 3*time.Second)
	dir, err := os.MkdirTemp(o.Dir, "redis-sentinel-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	return &Sentinel{MasterName: o.MasterName, dir: dir}, nil
}

// startSentinels starts o.Sentinels Sentinels monitoring the master at
// 127.0.0.1:masterPort and waits until they see it with o.Replicas replicas.
func (s *Sentinel) startSentinels(ctx context.Context, o SentinelOptions, masterPort int) error {
	conf := sentinelConf(o, masterPort, o.Sentinels/2+1)
	for range o.Sentinels {
		sn, err := launch(ctx, s.dir, 0, false, conf)
		if err != nil {
			return err
		}
		s.Sentinels = append(s.Sentinels, sn)
	}
	return s.waitSentinels(ctx, masterPort, o.Replicas)
}

// orDefault returns v, or def if v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// sentinelConf returns an argv builder that writes a Sentinel config file.
func sentinelConf(o SentinelOptions, masterPort, quorum int) func(dir string, port int) ([]string, error) {
	return func(dir string, port int) ([]string, error) {
		name := o.MasterName
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %q
logfile %q
sentinel resolve-hostnames no
sentinel announce-ip 127.0.0.1
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, port, dir, filepath.Join(dir, logName),
			name, masterPort, quorum,
			name, o.DownAfter.Milliseconds(),
			name, o.FailoverTimeout.Milliseconds(),
			name)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		return []string{path, "--sentinel"}, nil
	}
}

// waitReplicas waits until the master reports n replicas in state online.
func (s *Sentinel) waitReplicas(ctx context.Context, n int) error {
	return WaitReplicas(ctx, s.Master.Addr(), n)
}

// WaitReplicas waits until the master at addr reports n replicas in state
// online (INFO replication), or ctx ends.
func WaitReplicas(ctx context.Context, addr string, n int) error {
	c := redis.NewClient(clientOptions(addr))
	defer c.Close()
	return poll(ctx, "replicas of "+addr, func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if got := strings.Count(info, "state=online"); got != n {
			return fmt.Errorf("%d of %d replicas online", got, n)
		}
		return nil
	})
}

// waitSentinels waits until every Sentinel sees the master up, with all
// replicas and all other Sentinels.
func (s *Sentinel) waitSentinels(ctx context.Context, masterPort, replicas int) error {
	want := map[string]string{
		"ip":                  "127.0.0.1",
		"port":                strconv.Itoa(masterPort),
		"flags":               "master",
		"num-slaves":          strconv.Itoa(replicas),
		"num-other-sentinels": strconv.Itoa(len(s.Sentinels) - 1),
	}
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(clientOptions(sn.Addr()))
		err := poll(ctx, "sentinel "+sn.Addr(), func(ctx context.Context) error {
			m, err := c.Master(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			for k, v := range want {
				if m[k] != v {
					return fmt.Errorf("%s is %q, want %q", k, m[k], v)
				}
			}
			return nil
		})
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// clientOptions are go-redis options for short internal checks.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:            addr,
		DialTimeout:     time.Second,
		ReadTimeout:     time.Second,
		WriteTimeout:    time.Second,
		MaxRetries:      -1,
		PoolSize:        1,
		Protocol:        2,
		DisableIdentity: true,
	}
}

// URL returns the go-redis failover URL of the setup: its master's name
// and every Sentinel (redis://sentinel/0?master_name=NAME&addr=...), for a
// client that follows the master through failovers.
func (s *Sentinel) URL() string {
	addrs := s.SentinelAddrs()
	u := "redis://" + addrs[0] + "/0?master_name=" + s.MasterName
	for _, a := range addrs[1:] {
		u += "&addr=" + a
	}
	return u
}

// ReplicaOf makes the server at addr a replica of the master at master
// (host:port) at run time (REPLICAOF), so that a restart brings it back as
// a master.
func ReplicaOf(ctx context.Context, addr, master string) error {
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	_, err = command(ctx, addr, "REPLICAOF", host, port)
	return err
}

// SentinelAddrs returns the addresses of the Sentinels.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// masterAddrs asks every running Sentinel for the master's address and
// returns the answers received, in Sentinel order.
func (s *Sentinel) masterAddrs(ctx context.Context) ([]string, error) {
	var addrs []string
	var errs []error
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		opt := clientOptions(sn.Addr())
		opt.ReadTimeout = 500 * time.Millisecond
		c := redis.NewSentinelClient(opt)
		a, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
		c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", sn.Addr(), err))
			continue
		}
		if len(a) == 2 {
			addrs = append(addrs, net.JoinHostPort(a[0], a[1]))
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("redisproc: no sentinel answered: %w", errors.Join(errs...))
	}
	return addrs, nil
}

// CurrentMaster asks the running Sentinels for the master's address
// ("ip:port") and returns the answer of the majority of those that answered,
// or, without a majority, the first answer.
func (s *Sentinel) CurrentMaster(ctx context.Context) (string, error) {
	addrs, err := s.masterAddrs(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if 2*count(addrs, a) > len(addrs) {
			return a, nil
		}
	}
	return addrs[0], nil
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// WaitForFailover waits until every Sentinel that answers reports the same
// master address and that address is not old, and returns it. It gives up
// when ctx ends. By then the new master has accepted its promotion.
func (s *Sentinel) WaitForFailover(ctx context.Context, old string) (string, error) {
	var addr string
	err := poll(ctx, "failover away from "+old, func(ctx context.Context) error {
		addrs, err := s.masterAddrs(ctx)
		if err != nil {
			return err
		}
		if count(addrs, addrs[0]) != len(addrs) {
			return fmt.Errorf("sentinels disagree: %v", addrs)
		}
		if addrs[0] == old {
			return errors.New("master is still " + old)
		}
		addr = addrs[0]
		return nil
	})
	return addr, err
}

// ServerByAddr returns the master, replica or Sentinel listening on addr,
// or nil.
func (s *Sentinel) ServerByAddr(addr string) *Server {
	for _, srv := range s.all() {
		if srv.Addr() == addr {
			return srv
		}
	}
	return nil
}

func (s *Sentinel) all() []*Server {
	all := slices.Concat(s.Sentinels, s.Replicas)
	if s.Master != nil {
		all = append(all, s.Master)
	}
	return all
}

// Close closes the Sentinels, the replicas and the master, and removes the
// setup's directory. It is idempotent.
func (s *Sentinel) Close() error {
	return errors.Join(closeAll(s.all()), os.RemoveAll(s.dir))
}

// Failover asks a running Sentinel for a failover of the master (SENTINEL
// FAILOVER: a replica is promoted without the master being down), asking
// again while the Sentinels answer that no replica can be promoted yet or
// that a failover is in progress, until ctx ends. It returns once a
// Sentinel accepted; WaitForFailover waits for the promotion.
func (s *Sentinel) Failover(ctx context.Context) error {
	return poll(ctx, "SENTINEL FAILOVER "+s.MasterName, func(ctx context.Context) error {
		var errs []error
		for _, sn := range s.Sentinels {
			if !sn.Running() {
				continue
			}
			c := redis.NewSentinelClient(clientOptions(sn.Addr()))
			err := c.Failover(ctx, s.MasterName).Err()
			c.Close()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("sentinel %s: %w", sn.Addr(), err))
		}
		return errors.Join(errs...)
	})
}
