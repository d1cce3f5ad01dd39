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

// StartSentinels monitors a master the caller runs; Failover (SENTINEL
// FAILOVER, the master up) promotes its replica; the Sentinels then make
// the old master the new one's replica, which WaitReplicas sees.
func TestStartSentinelsFailover(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	servers, err := StartMasters(ctx, 2, Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		closeLater(t, s)
	}
	master, replica := servers[0], servers[1]
	if err := ReplicaOf(ctx, replica.Addr(), master.Addr()); err != nil {
		t.Fatal(err)
	}
	if err := WaitReplicas(ctx, master.Addr(), 1); err != nil {
		t.Fatal(err)
	}
	st, err := StartSentinels(ctx, SentinelOptions{Replicas: 1, DownAfter: time.Minute}, master.Port())
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, st)
	if st.Master != nil || len(st.Sentinels) != 3 || st.ServerByAddr(master.Addr()) != nil {
		t.Fatalf("master %v, %d sentinels: want only the Sentinels", st.Master, len(st.Sentinels))
	}
	if err := st.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	addr, err := st.WaitForFailover(ctx, master.Addr())
	if err != nil || addr != replica.Addr() {
		t.Fatalf("promoted %q, %v; want the replica %s", addr, err, replica.Addr())
	}
	if err := WaitReplicas(ctx, replica.Addr(), 1); err != nil {
		t.Fatalf("the old master did not rejoin as a replica: %v", err)
	}
}
