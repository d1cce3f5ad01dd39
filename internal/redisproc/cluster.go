package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots in a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server

	dir string
}

// StartCluster starts a cluster of `masters` masters without replicas
// (cluster-node-timeout 2000, nodes.conf in each node's Dir, no
// persistence, plus o.Args), splits the 16384 slots evenly among them in
// node order, and returns once every node reports cluster_state:ok, knows
// all nodes and sees all slots assigned. o.Port is ignored. Each node's
// port+10000, its cluster bus port, is free when the node is started.
// On error everything already started is closed.
func StartCluster(ctx context.Context, masters int, o Options) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redisproc: cluster needs at least one master, got %d", masters)
	}
	dir, err := os.MkdirTemp(o.Dir, "redis-cluster-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	c := &Cluster{dir: dir}
	for range masters {
		n, err := launch(ctx, dir, 0, true, func(dir string, port int) ([]string, error) {
			return standaloneArgs(slices.Concat([]string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-node-timeout", "2000",
			}, o.Args))(dir, port)
		})
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := c.form(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// form assigns the slots, introduces the nodes and waits for the cluster.
func (c *Cluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = redis.NewClient(clientOptions(n.Addr()))
		defer clients[i].Close()
	}
	for i, cl := range clients {
		lo, hi := i*clusterSlots/len(clients), (i+1)*clusterSlots/len(clients)-1
		if err := cl.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return fmt.Errorf("redisproc: CLUSTER ADDSLOTSRANGE on %s: %w", c.Nodes[i].Addr(), err)
		}
		// Distinct epochs up front spare the nodes resolving collisions.
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redisproc: CLUSTER SET-CONFIG-EPOCH on %s: %w", c.Nodes[i].Addr(), err)
		}
	}
	for _, n := range c.Nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.Port())).Err(); err != nil {
			return fmt.Errorf("redisproc: CLUSTER MEET %s: %w", n.Addr(), err)
		}
	}
	want := []string{
		"cluster_state:ok",
		fmt.Sprintf("cluster_slots_assigned:%d", clusterSlots),
		fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes)),
	}
	for i, cl := range clients {
		err := poll(ctx, "cluster node "+c.Nodes[i].Addr(), func(ctx context.Context) error {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, w := range want {
				if !strings.Contains(info, w+"\r\n") {
					return errors.New("CLUSTER INFO lacks " + w)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Close closes all nodes and removes the cluster's directory. It is
// idempotent.
func (c *Cluster) Close() error {
	return errors.Join(closeAll(c.Nodes), os.RemoveAll(c.dir))
}
