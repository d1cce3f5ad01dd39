package drill

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/faults"
)

// Shapes the soak can hold.
const (
	ShapeLock  = "lock"  // the reentrant Lock
	ShapeMutex = "mutex" // the non-reentrant Mutex
)

// SoakOptions configure the soak. Zero values take defaults.
type SoakOptions struct {
	Backend  string        // backend.Redis, backend.Etcd or backend.ZooKeeper
	Duration time.Duration // how long the workers run; default 2m
	Workers  int           // workers, each its own client (and session); default 8
	Names    int           // lock names the workers share; default 4
	Shape    string        // ShapeLock (default) or ShapeMutex
	// Work is the mean time inside the lock (each hold draws from
	// [Work/2, 3·Work/2]); default 10ms.
	Work time.Duration
	// Session is every client's session (Redis watchdog timeout, etcd
	// lease TTL, ZooKeeper session timeout); default 2s.
	Session time.Duration
	// Faults are the faults the schedule cycles through, in order; default
	// every fault of the backend (SoakFaults).
	Faults []string
	Every  time.Duration // a fault starts every Every; default 10s
	Down   time.Duration // and lasts Down before it is undone; default 3s
	Seed   uint64
	// FastElection runs the etcd cluster with a 50 ms heartbeat and a
	// 500 ms election timeout (etcd's: 100 ms and 1 s), so that sessions
	// outlive the election after a fault on the leader; etcd only.
	FastElection bool
	// History keeps every event of the run for SoakResult.WriteHistory
	// (--history); without it no event is kept.
	History bool
	// Progress is called as the soak goes (done and total in seconds).
	Progress func(what string, done, total int)
	// Started, if set, is called with the address of the servers the
	// soak started (as --redis, --etcd or --zk takes it) before its
	// workers start: for a view of the soak's locks (dlock top).
	Started func(addr string)
}

// Faults of the Redis soak only.
const (
	// FaultLatency delays every reply of the Redis master past the session
	// (toxiproxy latency of session + 500 ms) for Down.
	FaultLatency = "latency"
	// FaultFailover is a failover by the Sentinels (SENTINEL FAILOVER): the
	// replica becomes the master and the clients follow; it is over once
	// the old master has rejoined as the new one's replica.
	FaultFailover = "failover"
)

// SoakFaults lists the faults each backend's soak can inject. On Redis they
// strike the master of the moment of a master, its replica and three
// Sentinels (each server kept on disk with appendfsync always, so a SIGKILL
// and restart keeps the locks; every grant waits for the replica's
// acknowledgement, ReplicaAck): FaultPause, FaultKill, FaultCutClients (its
// address black-holed: its clients, the Sentinels and the replica reach it
// there), FaultLatency and FaultFailover. On etcd and ZooKeeper they strike
// the leader of the moment, as the consensus failover drill does
// (FaultPartition: cut off from its peers).
var SoakFaults = map[string][]string{
	backend.Redis:     {FaultPause, FaultKill, FaultCutClients, FaultLatency, FaultFailover},
	backend.Etcd:      {FaultPartition, FaultKill, FaultPause, FaultCutClients},
	backend.ZooKeeper: {FaultPartition, FaultKill, FaultPause, FaultCutClients},
}

func (o *SoakOptions) defaults() error {
	kinds, ok := SoakFaults[o.Backend]
	if !ok {
		return fmt.Errorf("soak: backend %q: want one of %s", o.Backend, strings.Join(backend.Kinds, ", "))
	}
	o.Duration = orDefault(o.Duration, 2*time.Minute)
	o.Workers = orDefault(o.Workers, 8)
	o.Names = orDefault(o.Names, 4)
	o.Shape = orDefault(o.Shape, ShapeLock)
	o.Work = orDefault(o.Work, 10*time.Millisecond)
	o.Session = orDefault(o.Session, 2*time.Second)
	o.Every = orDefault(o.Every, 10*time.Second)
	o.Down = orDefault(o.Down, 3*time.Second)
	if len(o.Faults) == 0 {
		o.Faults = kinds
	}
	for _, f := range o.Faults {
		if !slices.Contains(kinds, f) {
			return fmt.Errorf("soak: fault %q on %s: want one of %s", f, o.Backend, strings.Join(kinds, ", "))
		}
	}
	if o.Shape != ShapeLock && o.Shape != ShapeMutex {
		return fmt.Errorf("soak: shape %q: want %s or %s", o.Shape, ShapeLock, ShapeMutex)
	}
	if o.Duration <= 0 || o.Workers < 1 || o.Names < 1 || o.Work <= 0 || o.Session <= 0 || o.Every <= 0 || o.Down <= 0 {
		return errors.New("soak: duration, work, session, every, down > 0; workers, names >= 1")
	}
	if o.FastElection && o.Backend != backend.Etcd {
		return fmt.Errorf("soak: a fast election is an etcd setting, not %s's", o.Backend)
	}
	if o.Down >= o.Every {
		return fmt.Errorf("soak: --down %v must be shorter than --every %v", o.Down, o.Every)
	}
	return nil
}

// CheckSoakOptions checks o as Soak would (after its defaults): an error
// says which setting is wrong.
func CheckSoakOptions(o SoakOptions) error { return o.defaults() }

// Soak runs o.Workers workers, each its own client, on o.Names locks of one
// backend for o.Duration while a schedule of faults strikes the servers:
// every o.Every one of o.Faults (in turn) for o.Down. Every hold does a
// plain read-then-write of a counter and a fenced write (package fence) to
// a SQLite store no fault touches, and every acquire, loss signal, release
// and fenced write is recorded on one monotonic clock. At the end the
// history is checked: porcupine's mutex model (no two holds of one name
// overlap, a hold ending between the last time its holder saw it held and
// its loss signal or Unlock) and fenced-register model (package faults),
// fencing tokens growing with grants, an independent witness of who was
// inside, and the plain counters' lost updates; and each fault's figures
// are computed from the same history.
func Soak(ctx context.Context, o SoakOptions) (*SoakResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dlock-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	target, err := startSoakTarget(ctx, o.Backend, dir, o.Session, o.FastElection)
	if err != nil {
		return nil, err
	}
	defer target.close()
	b, err := backend.Open(ctx, o.Backend, target.addr())
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if o.Started != nil {
		o.Started(target.addr())
	}
	st, err := openSoakStore(ctx, dir, o.Names)
	if err != nil {
		return nil, err
	}
	defer st.close()

	s := newSoak(o, st)
	s.acquireOpts = target.options()
	clients := make([]backend.Client, o.Workers)
	for w := range clients {
		c, err := b.NewClient(ctx, backend.ClientOptions{Label: "w" + strconv.Itoa(w), Session: o.Session})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[w] = c
	}
	session := clients[0].Session() // as the service rounded it
	s.tl = NewTimeline()            // the soak's clock starts with its workers
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w, c := range clients {
		lock := c.Lock
		if o.Shape == ShapeMutex {
			lock = c.Mutex
		}
		wg.Go(func() { s.worker(wctx, w, lock, session) })
	}
	ferr := s.schedule(ctx, target)
	stop()
	wg.Wait()
	if ferr != nil && ctx.Err() != nil {
		return nil, ferr
	}
	end := s.tl.Since()
	if err := s.finalReads(ctx); err != nil {
		return nil, err
	}
	return s.result(ctx, session, end, ferr)
}

// soak is one soak's state: the history its workers record.
type soak struct {
	o     SoakOptions
	tl    *Timeline
	store *soakStore
	names []string
	// acquireOpts are the target's options for every acquire.
	acquireOpts []dlock.Option

	// nextStrike is when the next fault strikes, on tl's clock: a hold
	// granted less than beforeStrike before it lasts through the fault.
	nextStrike atomic.Int64

	mu     sync.Mutex
	ops    map[string][]faults.Op // per lock name, on tl's clock
	strike []soakStrike
	// plainDone counts the plain read-then-writes completed per name.
	plainDone map[string]int64
	storeErrs int64
	events    []HistoryEvent // every event, for --history (o.History)
}

// soakStrike is one fault of the schedule as it happened.
type soakStrike struct {
	Kind, Target string
	At, Undone   time.Duration // on the soak's clock
	Err          string
}

func newSoak(o SoakOptions, st *soakStore) *soak {
	return &soak{o: o, store: st, names: st.names, ops: map[string][]faults.Op{}, plainDone: map[string]int64{}}
}

func (s *soak) add(name string, op faults.Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[name] = append(s.ops[name], op)
}

// schedule strikes a fault every o.Every (in turn, while a whole fault and
// its undoing fit before the end) and returns when o.Duration is over. A
// failover is over only once the group is whole again, which takes longer
// than o.Every: it moves the rest of the schedule, so that the next fault
// comes o.Every - o.Down after it, as after any other, and its recovery is
// seen. (Any other fault whose undoing runs late is followed at once.)
func (s *soak) schedule(ctx context.Context, t soakTarget) error {
	o := s.o
	total := int(o.Duration / time.Second)
	var next time.Duration // when the next fault strikes
	for i := 0; ; i++ {
		next += o.Every
		if o.Progress != nil {
			o.Progress("soak", min(int(s.tl.Since()/time.Second), total), total)
		}
		if next+o.Down+time.Second > o.Duration {
			s.nextStrike.Store(math.MaxInt64)
			break
		}
		s.nextStrike.Store(int64(next))
		if err := sleep(ctx, next-s.tl.Since()); err != nil {
			return err
		}
		kind := o.Faults[i%len(o.Faults)]
		st := soakStrike{Kind: kind, At: s.tl.Since()}
		s.nextStrike.Store(math.MaxInt64) // until the next one is scheduled
		who, undo, err := t.inject(ctx, kind, o.Session)
		st.Target = who
		if err != nil {
			st.Err = firstLine(err.Error())
			st.Undone = s.tl.Since()
			s.record(st)
			continue
		}
		if err := sleep(ctx, o.Down); err != nil {
			_ = undo(context.WithoutCancel(ctx))
			return err
		}
		if err := undo(ctx); err != nil {
			st.Err = firstLine(err.Error())
		}
		st.Undone = s.tl.Since()
		if kind == FaultFailover { // the schedule goes on as if it had struck o.Down before it was over
			next = max(next, st.Undone-o.Down)
		}
		s.record(st)
	}
	err := sleep(ctx, o.Duration-s.tl.Since())
	if o.Progress != nil {
		o.Progress("soak", total, total)
	}
	return err
}

func (s *soak) record(st soakStrike) {
	s.mu.Lock()
	s.strike = append(s.strike, st)
	s.mu.Unlock()
}

// beforeStrike: every hold granted this long before a fault is held
// through it (to its undoing plus half a session), so that every fault
// meets holders who must be told they lost their locks.
const beforeStrike = 500 * time.Millisecond

// worker takes a random name, holds it, and does it again until ctx ends.
func (s *soak) worker(ctx context.Context, w int, lock func(string) dlock.Locker, session time.Duration) {
	rng := rand.New(rand.NewPCG(s.o.Seed, uint64(w)))
	who := "w" + strconv.Itoa(w)
	// A bounded wait: a worker queued behind a dead connection tries again.
	opts := append([]dlock.Option{dlock.Wait(2*session + s.o.Down)}, s.acquireOpts...)
	for ctx.Err() == nil {
		name := s.names[rng.IntN(len(s.names))]
		call := s.tl.Since()
		s.event(call, who, name, OpAcquire, EvInvoke, 0, nil)
		l, err := lock(name).Acquire(ctx, opts...)
		ret := s.tl.Since()
		if err != nil {
			s.event(ret, who, name, OpAcquire, EvRefused, 0, err)
			if ctx.Err() != nil {
				return // the soak is over: not a failed attempt
			}
			s.add(name, faults.Op{Kind: faults.Acquire, Client: who, Call: call, Return: ret})
			_ = sleep(ctx, 20*time.Millisecond) // the service is down or refusing: don't spin
			continue
		}
		s.event(ret, who, name, OpAcquire, EvGranted, l.Token(), nil)
		s.add(name, faults.Op{Kind: faults.Acquire, Client: who, Token: l.Token(), OK: true, Call: call, Return: ret})
		work := s.o.Work/2 + time.Duration(rng.Int64N(int64(s.o.Work)+1))
		if next := time.Duration(s.nextStrike.Load()); ret >= next-beforeStrike && ret < next {
			work = next - ret + s.o.Down + session/2 // held through the fault
		}
		s.hold(ctx, l, name, who, work)
	}
}

// hold is one hold: the plain read-then-write, the fenced write, the rest
// of the work with the lease checked every 5 ms, and Unlock. It records
// the fenced write, and the hold's end: a loss (between the last Err()
// that said held and the one that said lost) or a release (Unlock's call
// and return; the holder stops using the lock at the call).
func (s *soak) hold(ctx context.Context, l *dlock.Lease, name, who string, work time.Duration) {
	span := s.tl.Begin(Span{Lane: name, Who: who, Token: l.Token()})
	until := time.Now().Add(work)
	held := s.tl.Since()
	lost := func() {
		at := s.tl.Since()
		s.lostEvent(at, held, who, name, l.Token())
		s.add(name, faults.Op{Kind: faults.Lost, Client: who, Token: l.Token(), Call: held, Return: at})
		s.tl.EndAt(span, held)
		_ = l.Unlock(context.WithoutCancel(ctx))
	}
	if l.Err() != nil {
		lost()
		return
	}
	// The plain section checks nothing: two holders at once lose an update.
	sctx := context.WithoutCancel(ctx)
	s.event(s.tl.Since(), who, name, OpPlainWrite, EvInvoke, l.Token(), nil)
	err := s.store.plainIncrement(sctx, name, work/4)
	s.event(s.tl.Since(), who, name, OpPlainWrite, EvReturned, l.Token(), err)
	if err == nil {
		s.mu.Lock()
		s.plainDone[name]++
		s.mu.Unlock()
	} else {
		s.storeError()
	}
	call := s.tl.Since()
	s.event(call, who, name, OpFencedWrite, EvInvoke, l.Token(), nil)
	err = s.store.fencedWrite(sctx, name, l.Token())
	ret := s.tl.Since()
	switch {
	case err == nil || isStale(err):
		ev := EvAccepted
		if err != nil {
			ev = EvRejected
		}
		s.event(ret, who, name, OpFencedWrite, ev, l.Token(), err)
		s.add(name, faults.Op{Kind: faults.Write, Client: who, Token: l.Token(), OK: err == nil, Call: call, Return: ret})
	default: // the store failed: no verdict on the token
		s.event(ret, who, name, OpFencedWrite, EvReturned, l.Token(), err)
		s.storeError()
	}
	for {
		at := s.tl.Since()
		if l.Err() != nil {
			lost()
			return
		}
		held = at
		left := time.Until(until)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-l.Done():
		case <-time.After(min(left, 5*time.Millisecond)):
		}
	}
	call = s.tl.Since()
	s.event(call, who, name, OpRelease, EvInvoke, l.Token(), nil)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.Session)
	err = l.Unlock(uctx)
	cancel()
	ret = s.tl.Since()
	s.event(ret, who, name, OpRelease, EvReturned, l.Token(), err)
	if errors.Is(err, dlock.ErrLockLost) || errors.Is(err, dlock.ErrNotHeld) {
		// Lost between the last check and Unlock.
		s.lostEvent(ret, held, who, name, l.Token())
		s.tl.EndAt(span, held)
		s.add(name, faults.Op{Kind: faults.Lost, Client: who, Token: l.Token(), Call: held, Return: ret})
		return
	}
	// Released, or Unlock could not reach the store (the lock then ends with
	// its lease): either way the holder stopped using it at the call.
	s.tl.EndAt(span, call)
	s.add(name, faults.Op{Kind: faults.Release, Client: who, Token: l.Token(), OK: err == nil, Call: call, Return: ret})
}

func (s *soak) storeError() {
	s.mu.Lock()
	s.storeErrs++
	s.mu.Unlock()
}

// finalReads reads every name's fenced register once the workers are done,
// recorded as the last operation of its history.
func (s *soak) finalReads(ctx context.Context) error {
	for _, name := range s.names {
		call := s.tl.Since()
		s.event(call, "reader", name, OpRead, EvInvoke, 0, nil)
		_, tok, err := s.store.read(ctx, name)
		if err != nil {
			return err
		}
		ret := s.tl.Since() // one instant for --history and the checked history
		s.event(ret, "reader", name, OpRead, EvReturned, tok, nil)
		s.add(name, faults.Op{Kind: faults.Read, Client: "reader", Token: tok, OK: true, Call: call, Return: ret})
	}
	return nil
}
