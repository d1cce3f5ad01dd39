package dlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/seam"
)

// grantReplicated runs one acquire attempt a of sh followed by WAIT on the
// same connection to the key's master, as cfg asks (see ReplicaAck).
func (c *Client) grantReplicated(ctx context.Context, sh redisShape, a *attempt, cfg seam.Options) (grant, error) {
	spec := sh.spec()
	name := spec.name
	conn, err := c.masterFor(ctx, spec.keys.lock)
	if err != nil {
		return grant{}, redisErr(ctx, "acquire", spec.kind, name, err)
	}
	info, err := conn.Info(ctx, "replication").Result()
	if err != nil {
		return grant{}, redisErr(ctx, "acquire", spec.kind, name, err)
	}
	online := onlineReplicas(info)
	n := cfg.Replicas
	if n < 0 {
		n = online
	} else if online < n {
		return grant{}, wrap("acquire", spec.kind, name, fmt.Errorf("%w: %d of %d replicas connected", ErrNotReplicated, online, n))
	}
	var wait *redis.IntCmd
	acq := c.scripts.pipelined(ctx, conn.Pipeline, []scriptCall{sh.acquireCall(a)}, func(p redis.Pipeliner) {
		if n > 0 {
			wait = redis.NewIntCmd(ctx, "wait", n, ms(cfg.ReplicaWait))
			_ = p.Process(ctx, wait)
		}
	})[0]
	g, err := readGrant(acq)
	if err != nil {
		return grant{}, redisErr(ctx, "acquire", spec.kind, name, err)
	}
	if !g.ok || wait == nil {
		return g, nil
	}
	acks, err := wait.Result()
	if err == nil && acks >= int64(n) {
		return g, nil
	}
	// Undo this acquisition (for a re-entry: this one hold only).
	_, _ = sh.ops(a).release(context.WithoutCancel(ctx))
	if err != nil {
		return grant{}, wrap("acquire", spec.kind, name, fmt.Errorf("%w: %v", ErrNotReplicated, err))
	}
	return grant{}, wrap("acquire", spec.kind, name, fmt.Errorf("%w: %d of %d replicas acknowledged within %v", ErrNotReplicated, acks, n, cfg.ReplicaWait))
}

// masterFor returns a client whose pipelines run on one connection to the
// master serving key (through the Client's deadlined copy when ctx has a
// deadline: see scripter.via).
func (c *Client) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch r := c.scripts.via(ctx).(type) {
	case *redis.Client:
		return r, nil
	case *redis.ClusterClient:
		return r.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("%w: ReplicaAck needs a standalone, failover or cluster client, not %T", ErrInvalidArgument, c.rdb)
}

// onlineReplicas counts the replicas in state=online in INFO replication.
func onlineReplicas(info string) int {
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") {
			n++
		}
	}
	return n
}
