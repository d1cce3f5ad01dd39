-- fair_release.lua: release one hold of a FairLock; at count 0 hand it to the
-- first live waiter (see fair_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[3]  wake-up channel of the lock (see fair_handoff)
-- ARGV[4]  fence counter TTL in milliseconds
--
-- Returns 1  released: the count reached 0; the lock was handed to the first
--            live waiter (who alone is woken), or deleted if nobody waits
--         2  still held by this owner: the count was decremented (or this
--            operation was already applied: a retry changes nothing)
--         0  not ours: the key is gone or has another owner; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a hash
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return 0
end
if redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
  return 2
end
if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
  redis.call('HSET', KEYS[1], 'x', ARGV[2])
  return 2
end
redis.call('DEL', KEYS[1])
local now = server_ms()
fair_evict(KEYS[3], KEYS[4], now)
fair_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], now, ARGV[4])
return 1
