package dlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
	"github.com/redis/go-redis/v9"
)

var (
	semAcquire = withLibs("sem_acquire.lua", "fence.lua", "lib.lua")
	semRelease = withLibs("sem_release.lua", "lib.lua")
	semExtend  = withLibs("sem_extend.lua", "lib.lua")
	semSetCap  = plain("sem_set_permits.lua")
)

// semInspector is a Semaphore's answer to Inspect.
var semInspector = inspector{withLibs("sem_inspect.lua", "lib.lua", "inspect_lib.lua"), func(c *Client, name string) []string {
	k := (&Semaphore{c: c, name: name}).keys()
	return []string{k.lock, k.data, k.fence, k.count}
}}

// permitsTTL is how long a Semaphore's permit count stays in Redis after
// its last grant (or SetPermits); argPermitsTTL is it as a script argument.
const permitsTTL = 7 * 24 * time.Hour

var argPermitsTTL any = ms(permitsTTL)

// Semaphore lets up to a fixed number of holders in at once (Redisson's
// RPermitExpirableSemaphore). Every permit is held through its own Lease,
// with its own id, fencing token, lease and watchdog, like a lock: a permit
// whose holder crashed returns by itself when its lease runs out, and a
// permit lost (expired, removed) is reported lost like a lock. Waiters are
// woken when a permit is released.
//
// The permit count lives in Redis, next to the semaphore: the first
// Acquire that finds none sets it to its Semaphore's count, and an Acquire
// whose Semaphore has another count fails with ErrInvalidArgument (the
// store's count in the message) and changes nothing, so two callers cannot
// count against different bounds. SetPermits changes it. It lives for 7
// days after the last grant: a semaphore unused for longer is set anew by
// its next user. Permits are not granted in arrival order.
type Semaphore struct {
	c    *Client
	name string
	once sync.Once
	k    *semKeys

	permits *seam.Permits
}

// Semaphore returns the semaphore called name with the given number of
// permits. The name and count are checked by Acquire.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, name: name, permits: seam.NewPermits(permits)}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Acquire takes one permit; see Locker. Unlocking the Lease gives it back.
func (s *Semaphore) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return s.c.acquire(ctx, semShape{s, 1}, opts)
}

// AcquireN takes k permits at once (all or none, 1 <= k <= permits), one
// Lease per permit, each with its own id, token and lease. It waits, as
// Acquire does, until k permits are free at the same time.
func (s *Semaphore) AcquireN(ctx context.Context, k int, opts ...Option) ([]*Lease, error) {
	return s.c.acquireAll(ctx, semShape{s, k}, opts)
}

// Release gives back the permit with the given id (Lease.ID) on behalf of
// whoever holds it, for a permit whose Lease is out of reach (another
// process, a handle lost after a crash). It returns an error wrapping
// ErrNotHeld if no live permit has that id (never granted, released already,
// or its lease ran out). The Lease that held the permit, if any, is reported
// lost at its next renewal or check. To give back your own permit, use
// Lease.Unlock.
func (s *Semaphore) Release(ctx context.Context, id string) error {
	if err := checkCall(ctx, s.name); err != nil {
		return wrap("release", "semaphore", s.name, err)
	}
	if len(id) != 32 {
		return wrap("release", "semaphore", s.name, fmt.Errorf("%w: permit id %q", ErrNotHeld, id))
	}
	res, err := s.ops(id).release(ctx)
	if err != nil {
		return redisErr(ctx, "release", "semaphore", s.name, err)
	}
	if res != releaseFree {
		return wrap("release", "semaphore", s.name, fmt.Errorf("%w: no live permit %s", ErrNotHeld, ids.Short(id)))
	}
	return nil
}

// SetPermits sets the semaphore's permit count in Redis to n (at least 1),
// for every user of its name, and makes this Semaphore count against n.
// Permits held beyond a lowered count stay held until they are released;
// waiters are woken, as more permits may fit.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if err := checkCall(ctx, s.name); err != nil {
		return wrap("set permits", "semaphore", s.name, err)
	}
	if n < 1 {
		return wrap("set permits", "semaphore", s.name, fmt.Errorf("%w: %d permits (want >= 1)", ErrInvalidArgument, n))
	}
	k := s.keys()
	err := s.permits.Set(n, func() error {
		return s.c.call(ctx, semSetCap.call([]string{k.count}, n, argPermitsTTL, k.wake)).Err()
	})
	if err != nil {
		return redisErr(ctx, "set permits", "semaphore", s.name, err)
	}
	return nil
}

// count returns the permit count this Semaphore asks for.
func (s *Semaphore) count() int { return s.permits.Count() }

// countChanged reports whether err is a refusal for another count that
// this Semaphore now asks for, or is setting (its SetPermits in flight, or
// done since the attempt was sent): the attempt is tried again.
func (s *Semaphore) countChanged(err error) bool {
	if !redis.HasErrorPrefix(err, "PERMITS") {
		return false
	}
	stored, _, _ := permitsReply(err)
	n, cerr := strconv.Atoi(stored)
	return cerr == nil && s.permits.Accepts(n)
}

// semKeys are a Semaphore's keys (see lua/sem_acquire.lua).
type semKeys struct {
	lockKeys    // lock is the permits zset
	data, count string
}

func (s *Semaphore) keys() *semKeys {
	s.once.Do(func() {
		k := s.c.keys(s.name)
		s.k = &semKeys{lockKeys: k, data: k.lock + ":permits", count: k.lock + ":count"}
	})
	return s.k
}

func (s *Semaphore) ops(id string) semOps { return semOps{c: s.c, k: s.keys(), id: id} }

// semShape is an acquisition of k permits.
type semShape struct {
	s *Semaphore
	k int
}

func (sh semShape) spec() *shapeSpec {
	return &shapeSpec{kind: "semaphore", name: sh.s.name, keys: sh.s.keys().lockKeys, wake: wakeShared, check: sh.validate, replicaAck: true, tokens: sh.permitIDs,
		again: sh.s.countChanged}
}

func (sh semShape) validate() error {
	if err := seam.CheckName(sh.s.name); err != nil {
		return err
	}
	n := sh.s.count()
	if n < 1 {
		return fmt.Errorf("%w: %d permits (want >= 1)", ErrInvalidArgument, n)
	}
	if sh.k < 1 || sh.k > n {
		return fmt.Errorf("%w: %d permits asked for (want 1..%d)", ErrInvalidArgument, sh.k, n)
	}
	return nil
}

// permitIDs gives a its permits' ids: its own token for one permit (with
// an operation id of its own: the token is the permit's, not the call's),
// k new ones for k.
func (sh semShape) permitIDs(a *attempt) {
	a.op = ids.Op()
	a.args.op = a.op
	if sh.k == 1 {
		return
	}
	a.token = ""
	for range sh.k {
		a.tokens = append(a.tokens, ids.Token())
	}
}

func (sh semShape) acquireCall(a *attempt) scriptCall {
	k := sh.s.keys()
	args := []any{sh.s.count(), ms(a.ttl), a.meta, a.clockArg(), argPermitsTTL}
	if len(a.tokens) == 0 {
		args = append(args, a.token)
	}
	for _, id := range a.tokens {
		args = append(args, id)
	}
	return semAcquire.call([]string{k.lock, k.data, k.fence, k.count}, args...)
}

func (sh semShape) holdID(a *attempt) string { return sh.s.keys().lock + "|" + a.token }

// ops drives the attempt's permit, or all its permits (to undo a grant).
func (sh semShape) ops(a *attempt) holdOps {
	if len(a.tokens) == 0 {
		return sh.s.ops(a.token)
	}
	all := make(permitsOps, len(a.tokens))
	for i, id := range a.tokens {
		all[i] = sh.s.ops(id)
	}
	return all
}

// semOps drives one permit.
type semOps struct {
	c  *Client
	k  *semKeys
	id string
}

func (o semOps) releaseCall() scriptCall {
	return semRelease.call([]string{o.k.lock, o.k.data}, o.id, o.k.wake)
}

func (o semOps) releaseCalls() []scriptCall { return []scriptCall{o.releaseCall()} }

func (o semOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{semExtend.call([]string{o.k.lock, o.k.data}, o.id, ms(ttl))}
}

func (o semOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.c.callSettled(ctx, o.renewCalls(ttl)[0])
	return n == 1, err
}

func (o semOps) release(ctx context.Context) (seam.Released, error) {
	n, err := o.c.callSettled(ctx, o.releaseCall())
	return seam.Released(n), err
}

func (o semOps) verify(ctx context.Context) (bool, error) {
	n, err := o.c.callInt(ctx, zsetLive.call([]string{o.k.lock}, o.id))
	return n == 1, err
}

// permitsOps gives back all permits of one grant (an undone acquisition);
// it is never a Lease's ops.
type permitsOps []semOps

func (p permitsOps) releaseCalls() []scriptCall {
	calls := make([]scriptCall, len(p))
	for i, o := range p {
		calls[i] = o.releaseCall()
	}
	return calls
}

func (p permitsOps) renewCalls(time.Duration) []scriptCall { return nil }

func (p permitsOps) extend(context.Context, time.Duration) (bool, error) {
	return false, fmt.Errorf("%w: extend of a whole grant of permits", ErrInvalidArgument)
}

func (p permitsOps) release(ctx context.Context) (seam.Released, error) {
	res := releaseFree
	for _, o := range p {
		r, err := o.release(ctx)
		if err != nil {
			return releaseNotOurs, err
		}
		if r == releaseNotOurs {
			res = releaseNotOurs
		}
	}
	return res, nil
}

func (p permitsOps) verify(context.Context) (bool, error) {
	return false, fmt.Errorf("%w: verify of a whole grant of permits", ErrInvalidArgument)
}
