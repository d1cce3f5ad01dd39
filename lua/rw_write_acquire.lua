-- rw_write_acquire.lua: take or re-enter the write side of an RWLock, or wait for it (see rw_lib.lua).
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
-- ARGV[6]  queue timeout in milliseconds; 0: try once without waiting in the
--          writers key
-- ARGV[7]  id of the caller's Client (16 hex chars)
--
-- Returns {1, fence, count}  granted (count 1) or re-entered (count + 1, same
--                            fence; TTL raised to at least the lease); a retry
--                            of an operation already applied changes nothing
--         {0, ms}            wait: the writer's remaining TTL or the time until
--                            the last read hold expires; unless ARGV[6] is 0
--                            this call waits in the writers key (new readers
--                            now wait behind it) with a deadline of now + ARGV[6]
-- Errors  UPGRADE            this owner holds the read side (and not the write side)
--         WRONGTYPE          a key holds another type or shape
local now = server_ms()
rw_purge(KEYS[3], KEYS[4], KEYS[5], now)
local member = ARGV[2] .. '|' .. ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[7] .. '|' .. ARGV[4]
local o = redis.call('HGET', KEYS[1], 'o')
if not o and redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
end
if o == ARGV[1] then
  local n
  if redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
    n = tonumber(redis.call('HGET', KEYS[1], 'n'))
  else
    n = redis.call('HINCRBY', KEYS[1], 'n', 1)
    redis.call('HSET', KEYS[1], 'x', ARGV[2])
  end
  keep(KEYS[1], ARGV[3])
  redis.call('ZREM', KEYS[5], member)
  return {1, tonumber(redis.call('HGET', KEYS[1], 't')), n}
end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then
  redis.call('ZREM', KEYS[5], member)
  return redis.error_reply('UPGRADE this owner holds the read lock')
end
if not o and redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('ZREM', KEYS[5], member)
  local t, digits = next_fence(KEYS[2], ARGV[5])
  redis.call('HSET', KEYS[1], 's', 'rw', 'o', ARGV[1], 'n', 1, 't', digits, 'm', ARGV[4], 'x', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, t, 1}
end
local qt = tonumber(ARGV[6])
if qt > 0 then
  redis.call('ZADD', KEYS[5], now + qt, member)
  keep(KEYS[5], qt)
end
if o then
  return {0, redis.call('PTTL', KEYS[1])}
end
return {0, rw_until(KEYS[3], now)}
