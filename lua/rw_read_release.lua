-- rw_read_release.lua: release one read hold of an RWLock (see rw_lib.lua).
--
-- KEYS[1]  readers key
-- KEYS[2]  holds key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[3]  wake-up channel
--
-- Returns 1  released: this owner reads no more; when it was the last reader,
--            every waiter is woken ("a")
--         2  still held: the count was decremented (or this operation was
--            already applied: a retry changes nothing)
--         0  not ours: no live read hold of this owner; nothing changed
-- Errors  WRONGTYPE   a key holds another type
local now = server_ms()
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not score or not v or score <= now then
  return 0
end
local n, x, t, m = rw_hold(v)
if x == ARGV[2] then
  return 2
end
if n > 1 then
  redis.call('HSET', KEYS[2], ARGV[1], (n - 1) .. '|' .. ARGV[2] .. '|' .. t .. '|' .. m)
  return 2
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('PUBLISH', ARGV[3], 'a')
end
return 1
