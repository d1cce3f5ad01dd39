package redisproc

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSentinelFailover(t *testing.T) {
	ctx := testCtx(t, 40*time.Second)
	t0 := time.Now()
	st, err := StartSentinel(ctx, SentinelOptions{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, st)
	t.Logf("setup took %v", time.Since(t0))
	if len(st.Replicas) != 1 || len(st.Sentinels) != 3 || st.MasterName != "mymaster" {
		t.Fatalf("got %d replicas, %d sentinels, name %q", len(st.Replicas), len(st.Sentinels), st.MasterName)
	}

	old, err := st.CurrentMaster(ctx)
	if err != nil || old != st.Master.Addr() {
		t.Fatalf("CurrentMaster = %q, %v; want %s", old, err, st.Master.Addr())
	}
	if st.ServerByAddr(old) != st.Master || st.ServerByAddr(st.Sentinels[1].Addr()) != st.Sentinels[1] || st.ServerByAddr("127.0.0.1:1") != nil {
		t.Fatal("ServerByAddr mismatch")
	}

	failover := func() *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    st.MasterName,
			SentinelAddrs: st.SentinelAddrs(),
			DialTimeout:   time.Second,
			ReadTimeout:   time.Second,
		})
		closeLater(t, c)
		return c
	}
	before := failover()
	if err := before.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := st.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	addr, err := st.WaitForFailover(wctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover took %v", time.Since(t1))
	if addr != st.Replicas[0].Addr() || st.ServerByAddr(addr) != st.Replicas[0] {
		t.Fatalf("new master %s, want the replica %s", addr, st.Replicas[0].Addr())
	}

	if err := failover().Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET via new failover client: %v", err)
	}
	// A restarted Sentinel answers at once and keeps the new configuration.
	if err := st.Sentinels[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if cur, err := st.CurrentMaster(ctx); err != nil || cur != addr {
		t.Fatalf("CurrentMaster after Sentinel restart = %q, %v; want %s", cur, err, addr)
	}

	// The client from before the failover gets there too.
	eventually(t, 10*time.Second, "SET via old failover client", func(ctx context.Context) error {
		return before.Set(ctx, "k", "after2", 0).Err()
	})
}
