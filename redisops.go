package dlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// holdOps is what a Redis shape does for a lock it holds. A granted
// attempt wraps them as the seam's GrantOps (shape.go).
type holdOps interface {
	// extend sets the remaining lease to ttl if the lock is still ours;
	// false means it is not.
	extend(ctx context.Context, ttl time.Duration) (bool, error)
	// release gives up one hold (a shape whose release could be applied
	// twice by a retry sends an operation id of its own with it).
	release(ctx context.Context) (seam.Released, error)
	// verify reports whether the lock is still ours.
	verify(ctx context.Context) (bool, error)
	// releaseCalls are the calls that release the hold (as release does),
	// for Close's pipelines. nil: the hold releases itself through release
	// (a RedLock's: a quorum of nodes).
	releaseCalls() []scriptCall
	// renewCalls are the calls by which the watchdog renews the hold to
	// ttl in its pipelines: the hold is renewed when every call returns 1,
	// and lost when any returns 0. nil: the hold renews itself through
	// extend (a RedLock's: a quorum of nodes).
	renewCalls(ttl time.Duration) []scriptCall
}

// The Redis scripts' release replies are the seam's seam.Released values: 0 not
// ours, 1 free, 2 still held.
const (
	releaseNotOurs   = seam.ReleasedNotOurs
	releaseFree      = seam.ReleasedFree
	releaseStillHeld = seam.ReleasedStillHeld
)

// redisCause maps a Redis error reply to the sentinel it means (the reply's
// text stays in the message); other errors pass through.
func redisCause(err error) error {
	switch {
	case err == nil:
		return nil
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return fmt.Errorf("%w: %v", ErrWrongType, err)
	case redis.HasErrorPrefix(err, "UPGRADE"):
		return ErrUpgrade
	case redis.HasErrorPrefix(err, "PERMITS"):
		stored, want, _ := permitsReply(err)
		return seam.PermitsMismatch(stored, want)
	}
	return err
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// permitsReply reads a "PERMITS <stored> <asked>" error reply of
// sem_acquire.lua: the count the store keeps (as stored) and the one the
// attempt asked for.
func permitsReply(err error) (stored string, want int, ok bool) {
	f := strings.Fields(strings.TrimPrefix(err.Error(), "PERMITS"))
	if len(f) != 2 {
		return strings.Join(f, " "), 0, false
	}
	want, aerr := strconv.Atoi(f[1])
	return f[0], want, aerr == nil
}
