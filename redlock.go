package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// Bounds of RedLock's random delay between attempts.
const (
	redLockRetryMin = 20 * time.Millisecond
	redLockRetryMax = 200 * time.Millisecond
)

// redLock is a RedLock.
type redLock struct {
	name    string
	clients []*Client
}

// NewRedLock returns the RedLock called name over clients, one per
// independent master: the Redlock algorithm over N >= 3 independent Redis masters,
// one Client each (N = 5 is usual): a lock that survives the loss of a
// minority of them. It is a reentrant Lock on each node (same owner rules as
// Lock).
//
// An attempt sends the acquisition to every node at once; the lock is held
// only if at least N/2+1 nodes granted it and time is left of the lease:
// validity = lease - elapsed - drift > 0, elapsed measured on the monotonic
// clock from before the first request, drift = lease/100 + 2 ms. The Lease's
// local deadline is the end of that validity. A failed attempt gives back
// every grant it made before it returns (a node answering after the attempt
// gave up gives its grant back when it answers) and, if Wait allows, tries
// again when a RedLock on the same name is released through the same first
// Client (one waiter per release, in this process), or after a random delay
// of 20-200 ms (waiters in other processes are not woken: they would all
// try at once for every release). An attempt waits for the nodes at most a tenth of the lease (at
// least 100 ms, never beyond the validity): a node slower than that counts as
// a refusal. Once a quorum granted, the other nodes get as long again as that
// took (at least 10 ms) to be counted in.
//
// Extend (and the watchdog) need a quorum too, within the lease. The lock is
// lost when fewer than a quorum still hold it: when more than N - quorum nodes
// answer that it is not ours, or when no quorum renewed it before the local
// deadline. Unlock releases on every node and waits for their answers (and
// for grants still in flight from the acquisition, which give themselves
// back), at most 5 s; it reports ErrLockLost unless a quorum still held it.
//
// Events go to the first Client's Observer, and the first Client's watchdog
// renews it (at that Client's watchdog timeout).
//
// Token is the largest fencing token among the nodes of the quorum. Do not
// rely on it to fence storage: it is not guaranteed to increase. After a node
// restarts with its data lost, or a node's clock jumps, a later quorum can
// return a smaller token than an earlier one, and two clients can even hold
// the lock at once after a pause longer than the lease (Kleppmann's critique,
// 000 §2.8). RedLock lowers the odds of losing a lock to a single failure; it
// is not consensus. For tokens that never go back, use a consensus store
// (etcd, ZooKeeper) to issue them.
//
// ReplicaAck is not supported (the quorum is RedLock's answer to
// replication loss). Acquire checks the arguments: at least 3 clients, none
// nil, none twice.
func NewRedLock(name string, clients ...*Client) Locker {
	return &redLock{name: name, clients: slices.Clone(clients)}
}

// Name returns the lock's name.
func (r *redLock) Name() string { return r.name }

// Acquire takes the lock on a quorum of the nodes; see Locker and
// NewRedLock.
func (r *redLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	sh := redShape{r: r, att: &redAttempt{}}
	if len(r.clients) == 0 || r.clients[0] == nil {
		return nil, wrap("acquire", "redlock", r.name, sh.validate())
	}
	return r.clients[0].acquire(ctx, sh, opts)
}

// redAttempt is shared by one Acquire call and the Lease it grants: once
// the Lease is released, a grant still in flight when the quorum was reached
// gives itself back when it lands (it may land after the release did), and
// the release waits for that.
type redAttempt struct {
	mu       sync.Mutex
	released bool
	finished <-chan struct{} // of the granting try: closed when all its calls are done
}

func (a *redAttempt) setReleased() {
	a.mu.Lock()
	a.released = true
	a.mu.Unlock()
}

// settle waits (within ctx and unlockTimeout) until the granting try's
// calls, and the give-backs of those that landed late, are done.
func (a *redAttempt) settle(ctx context.Context) {
	a.mu.Lock()
	finished := a.finished
	a.mu.Unlock()
	if finished == nil {
		return
	}
	t := time.NewTimer(unlockTimeout)
	defer t.Stop()
	select {
	case <-finished:
	case <-ctx.Done():
	case <-t.C:
	}
}

func (a *redAttempt) isReleased() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.released
}

// nodeReply is one node's answer to one call.
type nodeReply struct {
	i     int
	yes   bool
	fence int64
	err   error
}

// Stop rules of quorum, given the quorum q, the yes count and the number of
// replies of N nodes.
var (
	// untilDecided: a quorum said yes, or more than N - q did not.
	untilDecided = func(n, q, yes, got int) bool { return yes >= q || got-yes > n-q }
	// untilAll: every node answered.
	untilAll = func(n, q, yes, got int) bool { return got == n }
)

// quorum sends call to every node at once and collects the replies until
// stop says so, ctx is done or wait has passed; with grace > 0, also once a
// quorum said yes and the others had as long again as that took (at least
// grace) to answer. It returns the replies it got by then. The calls are not
// cut short by any of that (a grant still in flight when a quorum was reached
// makes the lock hold on more nodes): they run under ctx's values with a
// timeout of callTimeout. late, if not nil, runs in the node's goroutine for
// each reply that came after the collection ended. finished is closed once
// every call (and late) is done. The goroutines are the first Client's: its
// Close waits for them.
func (r *redLock) quorum(ctx context.Context, wait, grace, callTimeout time.Duration, stop func(n, q, yes, got int) bool, call func(ctx context.Context, i int) nodeReply, late func(nodeReply)) (replies []nodeReply, finished <-chan struct{}) {
	n := len(r.clients)
	q := n/2 + 1
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	var running sync.WaitGroup
	running.Add(n)
	done := make(chan struct{})
	g := &r.clients[0].retries
	g.Go(func() {
		running.Wait()
		cancel()
		close(done)
	})
	ch := make(chan nodeReply, n)
	var mu sync.Mutex
	decided := false
	for i := range r.clients {
		g.Go(func() {
			defer running.Done()
			rep := call(cctx, i)
			rep.i = i
			mu.Lock()
			if !decided {
				ch <- rep // buffered: never blocks
				mu.Unlock()
				return
			}
			mu.Unlock()
			if late != nil {
				late(rep)
			}
		})
	}
	yes := 0
	start := time.Now()
	deadline := start.Add(wait)
	t := time.NewTimer(wait)
	defer t.Stop()
collect:
	for !stop(n, q, yes, len(replies)) {
		select {
		case rep := <-ch:
			replies = append(replies, rep)
			if rep.yes {
				yes++
				if yes == q && grace > 0 {
					t.Reset(min(max(grace, time.Since(start)), time.Until(deadline)))
				}
			}
		case <-t.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	mu.Lock()
	decided = true
	for len(ch) > 0 {
		replies = append(replies, <-ch)
	}
	mu.Unlock()
	return replies, done
}

// tally counts yes, explicit no (err nil) and failures, and returns the
// largest fence among the yes and the first error.
func tally(replies []nodeReply) (yes, no int, fence int64, err error) {
	for _, rep := range replies {
		switch {
		case rep.yes:
			yes++
			fence = max(fence, rep.fence)
		case rep.err == nil:
			no++
		case err == nil:
			err = rep.err
		}
	}
	return yes, no, fence, err
}

type redShape struct {
	r   *redLock
	att *redAttempt
}

// spec: the keys are the first node's (its wake channel is where waiters
// of the first Client wait for releases made through it); an attempt asks
// every node (try).
func (s redShape) spec() *shapeSpec {
	sp := &shapeSpec{kind: "redlock", name: s.r.name, wake: wakeLocal, owned: true, check: s.validate, try: s.try}
	if len(s.r.clients) > 0 && s.r.clients[0] != nil {
		sp.keys = s.r.clients[0].keys(s.r.name)
	}
	return sp
}

func (s redShape) validate() error {
	if err := seam.CheckName(s.r.name); err != nil {
		return err
	}
	if len(s.r.clients) < 3 {
		return fmt.Errorf("%w: a RedLock needs at least 3 clients (independent masters), got %d", ErrInvalidArgument, len(s.r.clients))
	}
	for i, c := range s.r.clients {
		if c == nil {
			return fmt.Errorf("%w: RedLock client %d is nil", ErrInvalidArgument, i)
		}
		if slices.Index(s.r.clients, c) != i {
			return fmt.Errorf("%w: RedLock client %d given twice", ErrInvalidArgument, i)
		}
		if c.isClosed() {
			return fmt.Errorf("%w (RedLock client %d)", ErrClosed, i)
		}
	}
	return nil
}

// nodeCall is the acquisition on node i: a reentrant Lock.
func (s redShape) nodeCall(i int, a *attempt) scriptCall {
	c := s.r.clients[i]
	k := c.queueKeys(s.r.name)
	return memberAcquire(c, &k, a)
}

func (s redShape) acquireCall(a *attempt) scriptCall { return s.nodeCall(0, a) }

func (s redShape) try(ctx context.Context, a *attempt) (grant, error) {
	name := s.r.name
	n := len(s.r.clients)
	q := n/2 + 1
	start := time.Now()
	validity := a.ttl - seam.Drift(a.ttl)
	budget := min(validity, max(a.ttl/10, 100*time.Millisecond))
	settled := make(chan struct{})
	acquired := false
	ops := redOps{r: s.r, owner: a.owner}
	late := func(rep nodeReply) {
		if rep.yes || rep.err != nil {
			<-settled
			if (!acquired || s.att.isReleased()) && !s.r.clients[0].isClosed() { // Close released every node
				ops.releaseNode(rep.i)
			}
		}
	}
	// The calls are made here: a slow node's call may outlive this try,
	// and the next try changes the attempt (its clock).
	calls := make([]scriptCall, n)
	for i := range calls {
		calls[i] = s.nodeCall(i, a)
	}
	// Healthy nodes are all counted in (their grants belong to the Lease
	// from the start); a slow one does not hold the attempt up past its grace.
	replies, finished := s.r.quorum(ctx, budget, 10*time.Millisecond, validity, untilAll, func(ctx context.Context, i int) nodeReply {
		g, err := readGrant(s.r.clients[i].call(ctx, calls[i]))
		if err != nil {
			return nodeReply{err: err}
		}
		return nodeReply{yes: g.ok, fence: g.fence}
	}, late)
	elapsed := time.Since(start)
	yes, no, fence, nodeErr := tally(replies)
	acquired = yes >= q && a.ttl-elapsed-seam.Drift(a.ttl) > 0 && ctx.Err() == nil
	close(settled)
	if acquired {
		s.att.mu.Lock()
		s.att.finished = finished
		s.att.mu.Unlock()
		return grant{ok: true, fence: fence}, nil
	}
	// Give back every grant: at once on the nodes that said yes, in the
	// background on those that failed (they may not answer soon), and those
	// that have not answered yet do it themselves when they do (late).
	var wg sync.WaitGroup
	for _, rep := range replies {
		switch {
		case rep.yes:
			wg.Add(1)
			go func() {
				defer wg.Done()
				ops.releaseNode(rep.i)
			}()
		case rep.err != nil:
			s.r.clients[0].retries.Go(func() { ops.releaseNode(rep.i) })
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return grant{}, wrap("acquire", "redlock", name, err)
	}
	detail := fmt.Sprintf("granted by %d of %d nodes in %v (%d refused, %d failed, %d no answer); %d needed",
		yes, n, elapsed.Round(time.Millisecond), no, len(replies)-yes-no, n-len(replies), q)
	if yes >= q {
		detail = fmt.Sprintf("quorum of %d after %v: no validity left of the %v lease", yes, elapsed.Round(time.Millisecond), a.ttl)
	}
	if nodeErr != nil {
		detail += "; first node error: " + nodeErr.Error()
	}
	delay := redLockRetryMin + rand.N(redLockRetryMax-redLockRetryMin)
	return grant{pttl: delay, detail: detail, wake: s.r.clients[0].keys(s.r.name).wake}, nil
}

func (s redShape) holdID(a *attempt) string {
	ids := make([]string, len(s.r.clients))
	for i, c := range s.r.clients {
		ids[i] = fmt.Sprintf("%p", c)
	}
	return "redlock|" + strings.Join(ids, ",") + "|" + s.r.name + "|" + a.owner
}

func (s redShape) ops(a *attempt) holdOps { return redOps{r: s.r, owner: a.owner, att: s.att} }

// redOps drives a held RedLock over its quorum. The watchdog renews it
// through extend (renewCalls: none).
type redOps struct {
	r     *redLock
	owner string
	att   *redAttempt // nil for a failed attempt's clean-up
}

// releaseNode gives back this owner's grant on node i, in the background of
// an attempt that failed.
func (o redOps) releaseNode(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	c := o.r.clients[i]
	k := c.queueKeys(o.r.name)
	_ = c.call(ctx, memberRelease(c, &k, o.owner, ids.Op())).Err()
}

// vote runs call on every node and reports true once a quorum said yes,
// false once more than N - quorum said no, and an error when neither is
// known (nodes failed or did not answer in time), collecting replies by the
// stop rule (within ctx and unlockTimeout).
func (o redOps) vote(ctx context.Context, stop func(n, q, yes, got int) bool, call func(ctx context.Context, i int) nodeReply) (bool, error) {
	n := len(o.r.clients)
	q := n/2 + 1
	replies, _ := o.r.quorum(ctx, unlockTimeout, 0, unlockTimeout, stop, call, nil)
	yes, no, _, err := tally(replies)
	switch {
	case yes >= q:
		return true, nil
	case no > n-q:
		return false, nil
	case err == nil:
		err = errors.New("no answer in time")
	}
	return false, fmt.Errorf("no quorum (%d yes, %d no of %d): %w", yes, no, n, err)
}

func (o redOps) releaseCalls() []scriptCall { return nil }

func (o redOps) renewCalls(time.Duration) []scriptCall { return nil }

func (o redOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	return o.vote(ctx, untilDecided, func(ctx context.Context, i int) nodeReply {
		c := o.r.clients[i]
		n, err := c.callInt(ctx, lockExtend.call([]string{c.keys(o.r.name).lock}, o.owner, ms(ttl)))
		return nodeReply{yes: err == nil && n == 1, err: err}
	})
}

func (o redOps) release(ctx context.Context) (seam.Released, error) {
	op := ids.Op()
	if o.att != nil {
		o.att.setReleased() // before any release is sent: see redAttempt
		defer o.att.settle(ctx)
	}
	// A local waiter is woken as the releases go out: its attempt follows
	// them to each node, and starts before this caller can try again.
	first := o.r.clients[0]
	first.sub.wakeLocal(first.keys(o.r.name).wake)
	ok, err := o.vote(ctx, untilAll, func(ctx context.Context, i int) nodeReply {
		c := o.r.clients[i]
		k := c.queueKeys(o.r.name)
		n, err := c.callInt(ctx, memberRelease(c, &k, o.owner, op))
		return nodeReply{yes: err == nil && n != int64(releaseNotOurs), err: err}
	})
	switch {
	case err != nil:
		return releaseNotOurs, err
	case !ok:
		return releaseNotOurs, nil
	}
	return releaseFree, nil
}

func (o redOps) verify(ctx context.Context) (bool, error) {
	return o.vote(ctx, untilDecided, func(ctx context.Context, i int) nodeReply {
		c := o.r.clients[i]
		ok, err := lockOwned(ctx, &c.conn, c.keys(o.r.name).lock, o.owner)
		return nodeReply{yes: ok, err: err}
	})
}
