-- fair_leave.lua: an Acquire call of a FairLock gives up (cancelled, Wait ran
-- out, error): it leaves the queue, and gives back a grant made to it that it
-- never saw (handed over while it was being cancelled, or a reply lost), so
-- the lock is not stuck until that grant's TTL (see fair_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id of the Acquire call
-- ARGV[3]  its queue member (op|owner|lease-ms|client|holder metadata)
-- ARGV[4]  wake-up channel of the lock (see fair_handoff)
-- ARGV[5]  fence counter TTL in milliseconds
--
-- Returns 1  a grant to this call was given back (the lock went to the next
--            live waiter, or is free)
--         0  there was none; at most the queue place was removed
-- Errors  WRONGTYPE   the key exists and is not a hash
redis.call('ZREM', KEYS[3], ARGV[3])
redis.call('ZREM', KEYS[4], ARGV[3])
local undone = 0
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] and
    (redis.call('HGET', KEYS[1], 'h') == ARGV[2] or redis.call('HGET', KEYS[1], 'x') == ARGV[2]) then
  undone = 1
  if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
    redis.call('HSET', KEYS[1], 'x', 'left:' .. ARGV[2])
    redis.call('HDEL', KEYS[1], 'h')
    return undone
  end
  redis.call('DEL', KEYS[1])
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  local now = server_ms()
  fair_evict(KEYS[3], KEYS[4], now)
  fair_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[4], now, ARGV[5])
end
return undone
