package etcdlock

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sessionID returns the Client's current session lease (0: none).
func (c *Client) sessionID() clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return 0
	}
	return c.sess.id
}

// minLease returns the cluster's minimum lease TTL as c learned it.
func (c *Client) minLease() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.minTTL
}

// keepFor returns how long c holds its current session past a confirmed
// keepalive (0: no session).
func (c *Client) keepFor() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return 0
	}
	return c.sess.keep
}

// keysIn returns the keys in dir, oldest first.
func keysIn(t testing.TB, cli *clientv3.Client, dir string) []*keyInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*keyInfo, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = &keyInfo{key: string(kv.Key), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
	}
	return out
}

type keyInfo struct {
	key   string
	rev   int64
	lease clientv3.LeaseID
}

// awaitKeys polls dir until ok accepts its keys, failing t after 10 s.
func awaitKeys(t testing.TB, cli *clientv3.Client, dir string, what string, ok func([]*keyInfo) bool) []*keyInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ks := keysIn(t, cli, dir)
		if ok(ks) {
			return ks
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s in %s: keys %v", what, dir, ks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaseAlive reports whether etcd still has lease id (its TTL in whole
// seconds is 0 in its last second, -1 once it is gone).
func leaseAlive(t testing.TB, cli *clientv3.Client, id clientv3.LeaseID) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.TimeToLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL >= 0
}

func revoke(t testing.TB, cli *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
}
