package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdOps is what a Redis shape does for a lock it holds.
type holdOps interface {
	// extend sets the remaining lease to ttl if the lock is still ours;
	// false means it is not.
	extend(ctx context.Context, ttl time.Duration) (bool, error)
	// release gives up one hold (op identifies the call, so a retry that
	// was already applied is not applied twice).
	release(ctx context.Context, op string) (releaseResult, error)
	// verify reports whether the lock is still ours.
	verify(ctx context.Context) (bool, error)
}

// releaseResult is the Redis scripts' release reply: 0 not ours, 1 free,
// 2 still held (the seam's Released values).
type releaseResult = Released

const (
	releaseNotOurs   = ReleasedNotOurs
	releaseFree      = ReleasedFree
	releaseStillHeld = ReleasedStillHeld
)

// redisOps is a Redis shape's holdOps as the seam's GrantOps: each release
// gets its own operation id, and Redis errors are mapped to sentinels.
type redisOps struct{ o holdOps }

func (r redisOps) Release(ctx context.Context) (Released, error) {
	res, err := r.o.release(ctx, newOpID())
	return res, redisCause(err)
}

func (r redisOps) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := r.o.extend(ctx, ttl)
	return ok, redisCause(err)
}

func (r redisOps) Verify(ctx context.Context) (bool, error) {
	ok, err := r.o.verify(ctx)
	return ok, redisCause(err)
}

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
	}
	return err
}
