package dlock

import (
	"context"
	"errors"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/seam"
)

var forceUnlockScript = plain("force_unlock.lua")

// ForceUnlock is for operators: it removes the lock called name whoever
// holds it, whatever its shape, by deleting its key <prefix>{name} and every
// key <prefix>{name}:* (queues, timeouts, readers, permits; not a
// Semaphore's permit count). The fence counter of its hash slot is another
// key and stays, so the next grant's fencing token is still greater than
// every token granted before. When anything was deleted it publishes a wake-all on
// the lock's channel, so the waiters of every process try again at once.
//
// The holders are not told: each finds out at its next renewal, Verify,
// Extend or Unlock (ErrLockLost), and until then may still believe it holds
// the lock. Only force-unlock a lock whose holder is gone or stuck.
//
// A free lock returns a Removal with no Keys and no error. An invalid name
// returns ErrInvalidName and changes nothing; a Redis error is returned as
// is (some keys may then have been deleted already).
func (c *Client) ForceUnlock(ctx context.Context, name string) (Removal, error) {
	if err := checkCall(ctx, name); err != nil {
		return Removal{}, wrap("force unlock", "", name, err)
	}
	info, err := c.Inspect(ctx, name)
	if err != nil && !errors.Is(err, ErrWrongType) {
		return Removal{}, err
	}
	if err != nil {
		info = Info{Name: name, Held: true, TTL: info.TTL, LastFence: info.LastFence}
	}
	k := c.keys(name)
	keys, err := c.lockKeysOf(ctx, k)
	if err != nil {
		return Removal{Info: info}, redisErr(ctx, "force unlock", "", name, err)
	}
	deleted, err := c.scripts.run(ctx, forceUnlockScript.call(keys, k.wake)).Int64Slice()
	if err != nil {
		return Removal{Info: info}, redisErr(ctx, "force unlock", "", name, err)
	}
	r := Removal{Info: info, Keys: []string{}}
	for i, d := range deleted {
		if d == 1 && i < len(keys) {
			r.Keys = append(r.Keys, keys[i])
		}
	}
	slices.Sort(r.Keys)
	return r, nil
}

// lockKeysOf returns the lock key and every <lock key>:* key but a
// Semaphore's permit count, found by SCAN on the node serving the lock's
// hash slot.
func (c *Client) lockKeysOf(ctx context.Context, k lockKeys) ([]string, error) {
	var node redis.Cmdable = c.rdb
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, k.lock)
		if err != nil {
			return nil, err
		}
		node = n
	}
	keys := []string{k.lock}
	err := scanNode(ctx, node, seam.QuoteGlob(k.lock)+":*", func(key string) {
		if key != k.lock+":count" && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	})
	return keys, err
}
