package fence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/set.lua
var setLua string

var setScript = redis.NewScript(setLua)

// Set writes value under key if token is at least the last token accepted
// for key (one holder may write several times with its token), in one Lua
// script: a hash {v: value, t: token}. ttl > 0 sets the key's TTL; 0 keeps
// it. It returns nil when written, an error wrapping a *StaleError
// (ErrStale) when a higher token was accepted before (nothing changed), or
// a Redis error. On Redis Cluster the key is one key: it runs anywhere.
func Set(ctx context.Context, rdb redis.Scripter, key, value string, token int64, ttl time.Duration) error {
	switch {
	case key == "":
		return wrap("set", key, fmt.Errorf("%w: empty key", ErrInvalidUpdate))
	case ttl < 0:
		return wrap("set", key, fmt.Errorf("%w: negative TTL %v", ErrInvalidUpdate, ttl))
	}
	if err := checkToken(token); err != nil {
		return wrap("set", key, err)
	}
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	v, err := setScript.Run(ctx, rdb, []string{key}, value, strconv.FormatInt(token, 10), ms).Int64Slice()
	if err != nil {
		return wrap("set", key, err)
	}
	if len(v) != 2 {
		return wrap("set", key, fmt.Errorf("unexpected reply %v", v))
	}
	if v[0] == 0 {
		return wrap("set", key, &StaleError{Token: token, Seen: v[1]})
	}
	return nil
}

// Get returns the value and the last token accepted for key, or ErrNoRow
// when the key does not exist.
func Get(ctx context.Context, rdb redis.Cmdable, key string) (value string, token int64, err error) {
	if key == "" {
		return "", 0, wrap("get", key, fmt.Errorf("%w: empty key", ErrInvalidUpdate))
	}
	vals, err := rdb.HMGet(ctx, key, "v", "t").Result()
	if err != nil {
		return "", 0, wrap("get", key, err)
	}
	if vals[1] == nil {
		return "", 0, wrap("get", key, ErrNoRow)
	}
	value, _ = vals[0].(string)
	ts, _ := vals[1].(string)
	token, err = strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", 0, wrap("get", key, fmt.Errorf("bad token %q", ts))
	}
	return value, token, nil
}
