-- rw_read_acquire.lua: take or re-enter the read side of an RWLock (see rw_lib.lua).
--
-- KEYS[1]  lock key (the writer)
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  readers key
-- KEYS[4]  holds key
-- KEYS[5]  writers key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Acquire call
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  the caller's clock in microseconds (decimal digits; see fence.lua)
--
-- A reader gets in unless another owner writes, or a writer waits and this
-- owner reads nothing yet (writer preference). The writer itself may read
-- (downgrade), and an owner that reads may read again (re-entry) even while a
-- writer waits, which would otherwise deadlock.
--
-- Returns {1, fence, count}  granted (count 1, a new fence) or re-entered
--                            (count + 1, same fence; the hold's expiry is
--                            raised to at least now + lease); a retry of an
--                            operation already applied changes nothing
--         {0, ms}            wait: the writer's remaining TTL, or the time
--                            until the first waiting writer's deadline
-- Errors  WRONGTYPE          a key holds another type or shape
local now = server_ms()
rw_purge(KEYS[3], KEYS[4], KEYS[5], now)
local w = redis.call('HGET', KEYS[1], 'o')
if not w and redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
end
if w and w ~= ARGV[1] then
  return {0, redis.call('PTTL', KEYS[1])}
end
local expiry = now + tonumber(ARGV[3])
local v = redis.call('HGET', KEYS[4], ARGV[1])
if v then
  local n, x, t, m = rw_hold(v)
  if x ~= ARGV[2] then
    n = n + 1
    redis.call('HSET', KEYS[4], ARGV[1], n .. '|' .. ARGV[2] .. '|' .. t .. '|' .. m)
  end
  if tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1])) < expiry then
    redis.call('ZADD', KEYS[3], expiry, ARGV[1])
  end
  keep(KEYS[3], ARGV[3])
  keep(KEYS[4], ARGV[3])
  return {1, tonumber(t), n}
end
if not w then
  local first = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
  if first[2] then
    return {0, tonumber(first[2]) - now}
  end
end
local _, t = next_fence(KEYS[2], ARGV[5])
redis.call('HSET', KEYS[4], ARGV[1], '1|' .. ARGV[2] .. '|' .. t .. '|' .. ARGV[4])
redis.call('ZADD', KEYS[3], expiry, ARGV[1])
keep(KEYS[3], ARGV[3])
keep(KEYS[4], ARGV[3])
return {1, tonumber(t), 1}
