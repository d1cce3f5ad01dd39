package dlock

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// grant is the reply of an acquire script: {1, fence, ...} granted, or
// {0, pttl[, pass]} refused, where pass = 1 means a wake-up this attempt
// could not use may serve another waiter.
type grant struct {
	ok     bool
	fence  int64
	fences []int64       // one per attempt.tokens
	ttl    time.Duration // the grant's TTL if not the attempt's lease (a hand-off)
	pttl   time.Duration // the holder's remaining TTL when !ok; < 0: none
	pass   bool          // refused, but pass the wake-up on
	wake   string        // channel to wait on when !ok; "": wait on the timer only
	detail string        // why not, added to ErrNotAcquired
	reply  []int64
}

// parseGrant reads an acquire script's reply.
func parseGrant(v []int64) (grant, error) {
	if len(v) < 2 {
		return grant{}, fmt.Errorf("unexpected acquire reply %v", v)
	}
	if v[0] == 1 {
		return grant{ok: true, fence: v[1], reply: v}, nil
	}
	return grant{pttl: time.Duration(v[1]) * time.Millisecond, reply: v}, nil
}

// intGrant reads an acquire script's one-integer reply: a fence n > 0
// granted, or n = -(pttl + 2) refused, where pttl is the holder's remaining
// TTL in ms (-1: the key has no TTL).
func intGrant(n int64) grant {
	if n > 0 {
		return grant{ok: true, fence: n}
	}
	return grant{pttl: time.Duration(-n-2) * time.Millisecond}
}

// ms is d in whole milliseconds, rounded up (what scripts take).
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// readGrant reads an acquire script's reply, an integer (intGrant) or an
// array (parseGrant).
func readGrant(cmd *redis.Cmd) (grant, error) {
	if err := cmd.Err(); err != nil {
		return grant{}, err
	}
	if n, ok := cmd.Val().(int64); ok {
		return intGrant(n), nil
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return grant{}, err
	}
	return parseGrant(v)
}
