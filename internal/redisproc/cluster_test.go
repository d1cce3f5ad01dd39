package redisproc

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestCluster(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	t0 := time.Now()
	c, err := StartCluster(ctx, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, c)
	t.Logf("setup took %v", time.Since(t0))
	if len(c.Nodes) != 3 || len(c.Addrs()) != 3 {
		t.Fatalf("got %d nodes", len(c.Nodes))
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	closeLater(t, cc)
	const keys = 100
	for i := range keys {
		if err := cc.Set(ctx, fmt.Sprint("key:", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key:%d: %v", i, err)
		}
	}
	for i := range keys {
		if got, err := cc.Get(ctx, fmt.Sprint("key:", i)).Int(); err != nil || got != i {
			t.Fatalf("GET key:%d = %d, %v", i, got, err)
		}
	}
	total := int64(0)
	for _, n := range c.Nodes {
		size, err := client(t, n.Addr()).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if size == 0 {
			t.Errorf("node %s holds no keys", n.Addr())
		}
		total += size
	}
	if total != keys {
		t.Errorf("nodes hold %d keys, want %d", total, keys)
	}
}
