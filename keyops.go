package dlock

import (
	"context"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// keyOps drives a lock kept in one Redis key by a holder id: release and
// extend by compare-then-act scripts, verify by a read.
type keyOps struct {
	c             *conn
	keys          lockKeys
	holder        string
	releaseScript *luaScript
	extendScript  *luaScript
	releaseOp     bool // the release script takes an operation id
	owned         func(ctx context.Context, c *conn, key, holder string) (bool, error)
}

func (o *keyOps) releaseCall() scriptCall {
	args := []any{o.holder}
	if o.releaseOp {
		args = append(args, ids.Op())
	}
	return o.releaseScript.call([]string{o.keys.lock}, append(args, o.keys.wake)...)
}

// renewCall is the script call that sets the TTL to ttl if still ours.
func (o *keyOps) renewCall(ttl time.Duration) scriptCall {
	return extendCall(o.extendScript, o.keys.lock, o.holder, o.c.ttlArg(ttl))
}

func (o *keyOps) releaseCalls() []scriptCall { return []scriptCall{o.releaseCall()} }

func (o *keyOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{o.renewCall(ttl)}
}

func (o *keyOps) release(ctx context.Context) (seam.Released, error) {
	n, err := o.c.callSettled(ctx, o.releaseCall())
	return seam.Released(n), err
}

func (o *keyOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.c.callSettled(ctx, o.renewCall(ttl))
	return n == 1, err
}

func (o *keyOps) verify(ctx context.Context) (bool, error) {
	return o.owned(ctx, o.c, o.keys.lock, o.holder)
}
