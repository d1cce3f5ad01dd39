package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/faults"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/observe"
	"github.com/redis/go-redis/v9"
)

// The migration test's figures: a watchdog of 1 s renews every ~333 ms, so
// every phase of the migration sees renewals.
const (
	migWD = time.Second
	// migPhaseRenewals is how many successful renewals of A each phase of
	// the migration waits for; migAfterRenewals, after the slot changed
	// owner.
	migPhaseRenewals = 2
	migAfterRenewals = 3
	// migBatch is the COUNT of CLUSTER GETKEYSINSLOT and so the keys per
	// MIGRATE: the four keys of a lock with a waiter move in two steps,
	// with a phase in between where the slot's keys are split.
	migBatch = 2
	// migPhaseTimeout bounds one phase: renewals that neither succeed nor
	// end in a loss that long mean a stalled watchdog.
	migPhaseTimeout = 20 * time.Second
	// migPatience is how long B keeps trying for the lock.
	migPatience = 90 * time.Second
)

// TestClusterSlotMigration moves the hash slot of a held lock (a Mutex,
// then a reentrant Lock) from its master to another master of a 3-master
// Redis Cluster, the way redis-cli --cluster reshard does (SETSLOT
// IMPORTING on the target, SETSLOT MIGRATING on the source, MIGRATE of the
// slot's keys in batches, SETSLOT NODE on every master), while holder A's
// watchdog renews it and contender B waits for it. A waits for renewals in
// every phase: slot migrating with the keys on the source, keys split
// between the nodes, keys all on the target before and after it owns the
// slot.
//
// The contract it checks, from the recorded history (not from logs):
// mutual exclusion holds throughout (no hold of B overlaps A's, which runs
// from its Acquire's return until its Unlock or the last moment it saw the
// lease held, and the history is linearizable as one mutex); after the
// migration A either still holds the lock (Verify says so and B has not
// been granted it) or was told it lost it (Err wraps ErrLockLost) before B
// was granted it; once A unlocks, B gets the lock with a strictly greater
// fencing token; afterwards no key of the lock but its fence counter is
// left on any master and neither Client keeps a hold.
func TestClusterSlotMigration(t *testing.T) { migrations(t, "") }

// TestClusterUnlockDuringMigration is TestClusterSlotMigration with A's
// Unlock called while the slot's keys are split between the two masters
// (where Redis answers a script on them TRYAGAIN): the Unlock waits the
// migration out and succeeds, B is granted the lock after it with a greater
// token, the holds never overlap and no key of the lock is left.
func TestClusterUnlockDuringMigration(t *testing.T) { migrations(t, "split") }

// migrations runs slotMigration for a Mutex and a Lock on a 3-master
// cluster.
func migrations(t *testing.T, unlockAt string) {
	noLeaks(t)
	cl := redistest.StartCluster(t, 3)
	nodes := clusterNodes(t, cl)
	for _, sh := range shapes {
		if sh.name != "Mutex" && sh.name != "Lock" {
			continue
		}
		t.Run(sh.name, func(t *testing.T) { slotMigration(t, cl, nodes, sh, unlockAt) })
	}
}

// refusals counts the release calls of one client that a Cluster refused
// with TRYAGAIN (a go-redis hook: the reply the client saw, after
// go-redis's own retries).
type refusals struct{ n atomic.Int64 }

func (r *refusals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.count(cmd)
		return err
	}
}

func (r *refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.count(cmd)
		}
		return err
	}
}

func (r *refusals) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 && strings.Contains(fmt.Sprint(args[1]), "release") && redis.HasErrorPrefix(cmd.Err(), "TRYAGAIN") {
		r.n.Add(1)
	}
}

// clusterNode is one master of the cluster with a direct client.
type clusterNode struct {
	srv *redisproc.Server
	rdb *redis.Client
	id  string
}

func clusterNodes(t *testing.T, cl *redisproc.Cluster) []*clusterNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nodes []*clusterNode
	for _, s := range cl.Nodes {
		rdb := newRDB(t, s.Addr())
		id, err := rdb.ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		nodes = append(nodes, &clusterNode{srv: s, rdb: rdb, id: id})
	}
	return nodes
}

// slotOwner returns the index in nodes of the master serving slot.
func slotOwner(t *testing.T, ctx context.Context, nodes []*clusterNode, slot int) int {
	t.Helper()
	slots, err := nodes[0].rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	for _, r := range slots {
		if r.Start <= slot && slot <= r.End && len(r.Nodes) > 0 {
			for i, n := range nodes {
				if n.id == r.Nodes[0].ID {
					return i
				}
			}
		}
	}
	t.Fatalf("no master serves slot %d: %+v", slot, slots)
	return -1
}

// renewalWatch counts the renewals of A's Client (its only hold is A's)
// and kicks a waiter at each renewal or loss.
type renewalWatch struct {
	observe.Nop
	ok, failed atomic.Int64
	kick       chan struct{}

	mu   sync.Mutex
	errs []string
	lost []observe.LostEvent
}

func (r *renewalWatch) ObserveRenewal(ev observe.RenewalEvent) {
	if ev.OK {
		r.ok.Add(1)
	} else {
		r.failed.Add(1)
		r.mu.Lock()
		r.errs = append(r.errs, fmt.Sprint(ev.Err))
		r.mu.Unlock()
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *renewalWatch) ObserveLost(ev observe.LostEvent) {
	r.mu.Lock()
	r.lost = append(r.lost, ev)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *renewalWatch) failures() ([]string, []observe.LostEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs), slices.Clone(r.lost)
}

// settle waits until A's watchdog has renewed n more times or A lost the
// lock, and returns the successful renewals seen.
func settle(t *testing.T, phase string, rw *renewalWatch, hl *held, n int64) int64 {
	t.Helper()
	start := time.Now()
	base := rw.ok.Load()
	timer := time.NewTimer(migPhaseTimeout)
	defer timer.Stop()
	for rw.ok.Load() < base+n && hl.l.Err() == nil {
		select {
		case <-rw.kick:
		case <-hl.l.Done():
		case <-timer.C:
			t.Fatalf("%s: %d successful renewals of A in %v, and no loss: the watchdog stalled", phase, rw.ok.Load()-base, migPhaseTimeout)
		}
	}
	got := rw.ok.Load() - base
	t.Logf("phase %-9s %d renewals of A in %v (A's Err: %v)", phase+":", got, time.Since(start).Round(time.Millisecond), hl.l.Err())
	return got
}

// migrateSlot moves slot from src to dst as redis-cli --cluster reshard
// does, calling pause after each step. It returns how many keys it moved.
func migrateSlot(t *testing.T, ctx context.Context, slot int, src, dst *clusterNode, others []*clusterNode, pause func(phase string)) int {
	t.Helper()
	do := func(n *clusterNode, args ...any) string {
		t.Helper()
		res, err := n.rdb.Do(ctx, args...).Text()
		if err != nil {
			t.Fatalf("%v on %s: %v", args[:min(len(args), 7)], n.srv.Addr(), err)
		}
		return res
	}
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", src.id)
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id)
	pause("migrating")
	moved, split := 0, false
	for {
		keys, err := src.rdb.ClusterGetKeysInSlot(ctx, slot, migBatch).Result()
		if err != nil {
			t.Fatalf("CLUSTER GETKEYSINSLOT on the source: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.srv.Port(), "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if res := do(src, args...); res != "OK" && res != "NOKEY" {
			t.Fatalf("MIGRATE %v: %s", keys, res)
		}
		moved += len(keys)
		left, err := src.rdb.ClusterCountKeysInSlot(ctx, slot).Result()
		if err != nil {
			t.Fatalf("CLUSTER COUNTKEYSINSLOT on the source: %v", err)
		}
		if left > 0 && !split {
			split = true
			pause("split")
		}
	}
	pause("moved")
	// The target first, then the source, then the other masters.
	for _, n := range append([]*clusterNode{dst, src}, others...) {
		do(n, "CLUSTER", "SETSLOT", slot, "NODE", dst.id)
	}
	return moved
}

// contender is B: it tries for the lock until granted, retrying after
// errors.
type contender struct {
	hd      *holder
	granted chan struct{} // closed when B holds the lock; hl and at are set
	hl      *held
	at      time.Time
	done    chan struct{}
	cancel  context.CancelFunc

	mu   sync.Mutex
	errs []string // Acquire errors
}

func contend(hd *holder) *contender {
	ctx, cancel := context.WithTimeout(context.Background(), migPatience)
	c := &contender{hd: hd, granted: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		for {
			hl, err := hd.acquire(ctx, dlock.Wait(migPatience))
			if err == nil && hl.l.Err() == nil {
				c.hl, c.at = hl, time.Now()
				close(c.granted)
				return
			}
			if err == nil { // granted but lost already: a refusal
				_ = hl.unlock(context.Background())
				err = errors.New("granted a lease already lost")
			}
			c.mu.Lock()
			c.errs = append(c.errs, err.Error())
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return c
}

func (c *contender) errList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs)
}

// lockKeysLeft returns the keys of lock name left on any master (the fence
// counter of its slot is another key), waiting up to 10 s for keys on their
// way out.
func lockKeysLeft(t *testing.T, rdb *redis.ClusterClient, name string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var mu sync.Mutex
		var left []string
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			iter := m.Scan(ctx, 0, dlock.DefaultPrefix+"{"+name+"}*", 100).Iterator()
			for iter.Next(ctx) {
				mu.Lock()
				left = append(left, m.Options().Addr+" "+iter.Val())
				mu.Unlock()
			}
			return iter.Err()
		})
		cancel()
		if err == nil && len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Errorf("SCAN of the masters: %v", err)
			}
			sort.Strings(left)
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slotMigration is one shape's run of TestClusterSlotMigration; with
// unlockAt a phase of the migration, A unlocks in that phase.
func slotMigration(t *testing.T, cl *redisproc.Cluster, nodes []*clusterNode, sh shape, unlockAt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := "migrate-" + sh.name
	key := dlock.DefaultPrefix + "{" + name + "}"
	h := faults.NewHistory()
	rw := &renewalWatch{kick: make(chan struct{}, 1)}
	log := &syncBuffer{}
	ardb := redistest.ClusterClient(t, cl)
	refused := &refusals{}
	ardb.AddHook(refused)
	ca := newClient(t, ardb, dlock.Config{TTL: migWD, Observer: rw,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cb := newClient(t, redistest.ClusterClient(t, cl), dlock.Config{TTL: migWD})
	view := redistest.ClusterClient(t, cl) // the test's own reads
	a := &holder{name: "A", h: h, c: ca, lk: sh.holder(ca, name)}
	b := &holder{name: "B", h: h, c: cb, lk: sh.contender(cb, name)}

	slot64, err := view.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	slot := int(slot64)
	si := slotOwner(t, ctx, nodes, slot)
	src, dst := nodes[si], nodes[(si+1)%len(nodes)]
	var others []*clusterNode
	for i, n := range nodes {
		if i != si && n != dst {
			others = append(others, n)
		}
	}

	hl, err := a.acquire(ctx)
	if err != nil || hl.l.Err() != nil {
		t.Fatalf("A: acquire: %v", err)
	}
	aTok, aEnded := hl.l.Token(), false
	t.Cleanup(func() {
		if !aEnded {
			_ = hl.unlock(context.Background())
		}
	})
	bc := contend(b)
	bEnded := false
	t.Cleanup(func() {
		bc.cancel()
		<-bc.done
		select {
		case <-bc.granted:
			if !bEnded {
				_ = bc.hl.unlock(context.Background())
			}
		default:
		}
	})
	// B waits in the lock's queue: its place moves with the slot.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n, err := view.Exists(ctx, key+":queue").Result(); err == nil && n == 1 {
			break
		}
		select {
		case <-bc.granted:
			t.Fatalf("B was granted the lock (token %d) while A holds it, before the migration", bc.hl.l.Token())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not queue for the lock within 20 s (Acquire errors: %v)", bc.errList())
		}
		time.Sleep(10 * time.Millisecond)
	}

	began := time.Now()
	renewals := map[string]int64{}
	var (
		aEnd      time.Time // A's Unlock call, or the last time it saw its lease held
		unlockErr error
		unlocked  = make(chan struct{})
	)
	moved := migrateSlot(t, ctx, slot, src, dst, others, func(phase string) {
		switch {
		case phase == unlockAt:
			aEnd, aEnded = time.Now(), true
			go func() {
				defer close(unlocked)
				uctx, ucancel := context.WithTimeout(ctx, migPatience)
				defer ucancel()
				unlockErr = hl.unlock(uctx)
			}()
			// The migration goes on once Redis has refused the Unlock's
			// release for the split slot (TRYAGAIN), so that the release
			// really waits a moving slot out.
			for deadline := time.Now().Add(migPhaseTimeout); refused.n.Load() == 0; {
				select {
				case <-unlocked:
					t.Fatalf("A's Unlock returned (%v) before Redis refused it for the split slot", unlockErr)
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("no TRYAGAIN for A's release within %v of its Unlock in phase %q", migPhaseTimeout, unlockAt)
				}
			}
		case aEnded: // nothing of A's to renew
		default:
			renewals[phase] = settle(t, phase, rw, hl, migPhaseRenewals)
		}
	})
	migrated := time.Since(began)
	// The slot really moved: the source keeps none of its keys, the target
	// serves the fence counter (and A's lock key while A holds it).
	if n, err := src.rdb.ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || n != 0 {
		t.Errorf("source %s: %d keys left in slot %d (%v)", src.srv.Addr(), n, slot, err)
	}
	if keys, err := dst.rdb.ClusterGetKeysInSlot(ctx, slot, 100).Result(); err != nil || !slices.ContainsFunc(keys, func(k string) bool {
		return strings.HasPrefix(k, dlock.DefaultPrefix+"fence:{")
	}) {
		t.Errorf("target %s does not serve the fence counter of slot %d: its keys %v (%v)", dst.srv.Addr(), slot, keys, err)
	}
	if owner := slotOwner(t, ctx, nodes, slot); nodes[owner] != dst {
		t.Errorf("slot %d served by %s after the migration, want %s", slot, nodes[owner].srv.Addr(), dst.srv.Addr())
	}
	if unlockAt != "" {
		if !aEnded {
			t.Fatalf("the migration had no phase %q: A never unlocked", unlockAt)
		}
		select {
		case <-unlocked:
		case <-time.After(migPatience):
			t.Fatalf("A's Unlock, called in phase %q, had not returned %v after the migration", unlockAt, migPatience)
		}
		if unlockErr != nil {
			t.Fatalf("A's Unlock, called in phase %q of the migration: %v", unlockAt, unlockErr)
		}
		bGranted(t, bc, aTok, aEnd)
		migrationEnd(t, ctx, h, name, view, bc, ca, cb, &bEnded)
		t.Logf("slot %d (%d keys moved) %s -> %s in %v; A unlocked in phase %q", slot, moved, src.srv.Addr(),
			dst.srv.Addr(), migrated.Round(time.Millisecond), unlockAt)
		return
	}
	renewals["after"] = settle(t, "after", rw, hl, migAfterRenewals)

	// Verdict: A still holds the lock, or it was told it lost it.
	var verr error
	for deadline := time.Now().Add(15 * time.Second); ; {
		vctx, vcancel := context.WithTimeout(ctx, 5*time.Second)
		verr = hl.l.Verify(vctx)
		vcancel()
		if verr == nil || errors.Is(verr, dlock.ErrLockLost) || time.Now().After(deadline) {
			break
		}
		t.Logf("A: Verify: %v (retrying)", verr)
		time.Sleep(100 * time.Millisecond)
	}
	kept := verr == nil
	switch {
	case kept:
		select {
		case <-bc.granted:
			t.Errorf("B was granted the lock (token %d) while A still holds it", bc.hl.l.Token())
		default:
		}
		if n, err := dst.rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("A holds the lock but the target %s has no %s: EXISTS %d (%v)", dst.srv.Addr(), key, n, err)
		}
		aEnd = time.Now()
		aEnded = true
		if err := hl.unlock(ctx); err != nil {
			t.Errorf("A: Unlock of the lock it kept through the migration: %v", err)
		}
	case errors.Is(verr, dlock.ErrLockLost):
		<-hl.done // the watcher recorded when A stopped believing it held the lock
		_, _, aEnd = hl.times()
		if err := hl.l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("A: Verify said lost, Err() = %v", err)
		}
	default:
		t.Fatalf("A: Verify after the migration: %v", verr)
	}
	bGranted(t, bc, aTok, aEnd)
	if !kept {
		aEnded = true
		if err := hl.unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Errorf("A: Unlock after the loss = %v, want ErrLockLost", err)
		}
	}
	migrationEnd(t, ctx, h, name, view, bc, ca, cb, &bEnded)

	renewErrs, lost := rw.failures()
	bErrs := bc.errList()
	verdict := "kept the lock through the migration"
	if !kept {
		verdict = fmt.Sprintf("lost the lock (%v; loss events %+v)", verr, lost)
	}
	t.Logf("slot %d (%d keys moved) %s -> %s in %v; A %s: renewals per phase %v, %d in all, %d failed %v",
		slot, moved, src.srv.Addr(), dst.srv.Addr(), migrated.Round(time.Millisecond), verdict,
		renewals, rw.ok.Load(), rw.failed.Load(), renewErrs)
	byErr := map[string]int{}
	for _, e := range bErrs {
		byErr[e]++
	}
	t.Logf("B granted %v after A's end (token %d > A's %d), after %d Acquire calls that failed: %v",
		bc.at.Sub(aEnd).Round(time.Millisecond), bc.hl.l.Token(), aTok, len(bErrs), byErr)
	if t.Failed() {
		t.Logf("A's log:\n%s", log.String())
	}
}

// bGranted checks that B, waiting through the migration, was granted the
// lock after A's end (aEnd: its Unlock call, or the last moment it saw its
// lease held) with a greater token, its one waiting Acquire never failing:
// a slot that moves is a passing state (before, B's Acquire failed 9–11
// times per run with TRYAGAIN or an ASK redirect go-redis gave up on).
func bGranted(t *testing.T, bc *contender, aTok int64, aEnd time.Time) {
	t.Helper()
	select {
	case <-bc.granted:
	case <-time.After(30 * time.Second):
		t.Fatalf("B was not granted the lock within 30 s of A's end (Acquire errors: %v)", bc.errList())
	}
	if bTok := bc.hl.l.Token(); bTok <= aTok {
		t.Errorf("B's token %d is not greater than A's %d", bTok, aTok)
	}
	if !bc.at.After(aEnd) {
		t.Errorf("B was granted the lock at %v, before A's end at %v", bc.at.Format(time.StampMicro), aEnd.Format(time.StampMicro))
	}
	if errs := bc.errList(); len(errs) > 0 {
		t.Errorf("B's waiting Acquire failed %d times while the slot moved: %v", len(errs), errs)
	}
}

// migrationEnd unlocks B and checks the run's end: the history has no
// overlapping holds and is one mutex's, no key of the lock but its fence
// counter is left, and neither Client keeps a hold.
func migrationEnd(t *testing.T, ctx context.Context, h *faults.History, name string, view *redis.ClusterClient,
	bc *contender, ca, cb *dlock.Client, bEnded *bool) {
	t.Helper()
	*bEnded = true
	if err := bc.hl.unlock(ctx); err != nil {
		t.Errorf("B: Unlock: %v", err)
	}
	<-bc.done
	if n := faults.DoubleGrants(h.Ops()); n != 0 {
		t.Errorf("%d overlapping holds of A and B", n)
	}
	checkHistory(t, h, true)
	if left := lockKeysLeft(t, view, name); len(left) > 0 {
		t.Errorf("keys of the lock left after every lease ended: %v", left)
	}
	noZombie(t, "A", ca)
	noZombie(t, "B", cb)
}
