package dlock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyOps drives a lock kept in one Redis key by a holder id: release and
// extend by compare-then-act scripts, verify by a read.
type keyOps struct {
	c             *Client
	keys          lockKeys
	lockList      []string // {keys.lock}, shared by every call; nil: built per call
	holder        string
	releaseScript *redis.Script
	extendScript  *redis.Script
	releaseOp     bool // the release script takes an operation id
	owned         func(ctx context.Context, c *Client, key, holder string) (bool, error)
}

// lockKeyList is the KEYS of the one-key scripts.
func (o *keyOps) lockKeyList() []string {
	if o.lockList != nil {
		return o.lockList
	}
	return []string{o.keys.lock}
}

func (o *keyOps) releaseCall(op string) scriptCall {
	args := []any{o.holder}
	if o.releaseOp {
		args = append(args, op)
	}
	return scriptCall{o.releaseScript, o.lockKeyList(), append(args, o.keys.wake)}
}

// renewCall is the script call that sets the TTL to ttl if still ours.
func (o *keyOps) renewCall(ttl time.Duration) scriptCall {
	return scriptCall{o.extendScript, o.lockKeyList(), []any{o.holder, ms(ttl)}}
}

func (o *keyOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{o.renewCall(ttl)}
}

func (o *keyOps) release(ctx context.Context, op string) (releaseResult, error) {
	n, err := o.releaseCall(op).run(ctx, o.c.rdb).Int64()
	return releaseResult(n), err
}

func (o *keyOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.renewCall(ttl).run(ctx, o.c.rdb).Int64()
	return n == 1, err
}

func (o *keyOps) verify(ctx context.Context) (bool, error) {
	return o.owned(ctx, o.c, o.keys.lock, o.holder)
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
