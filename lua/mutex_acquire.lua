-- mutex_acquire.lua: grant a Mutex, or queue for it (see mutex_lib.lua).
--
-- KEYS[1]  lock key (string value: token|fence|holder metadata)
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  token: 32 hex chars, unique to one Acquire call
-- ARGV[2]  operation id of the Acquire call (16 hex chars)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  fence counter TTL in milliseconds
-- ARGV[6]  queue timeout in milliseconds; 0: try once without queueing
-- ARGV[7]  wake-up channel of the lock (hand-offs go to ARGV[7] .. ':' .. client)
-- ARGV[8]  id of the caller's Client (16 hex chars)
-- ARGV[9]  '1' if an earlier attempt of this call queued it, else '0'
--
-- A free Mutex goes to the caller, queue or not (a Mutex is not fair; a
-- release hands it to the first waiter, so it is free with waiters queued
-- only after a holder's lease ran out).
--
-- Returns {1, fence}  granted; also when the key already holds ARGV[1]: it was
--                     handed to this call, or this is a retry whose first
--                     reply was lost; the TTL becomes the lease
--         {0, pttl}   held by someone else; pttl is the holder's remaining TTL
--                     in ms (-1: the key has no TTL); unless ARGV[6] is 0 the
--                     call is queued (or keeps its place), its deadline now +
--                     ARGV[6]
-- Errors  WRONGTYPE   the key exists and is not a string
local member = q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[8], ARGV[4])
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 32) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, mutex_fence(v)}
end
if not v then
  local _, now_us = clock()
  local t = fence_at(KEYS[2], ARGV[5], now_us, nil)
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%.0f', t) .. '|' .. ARGV[4], 'PX', ARGV[3])
  if ARGV[9] == '1' then
    q_leave(KEYS[3], KEYS[4], member)
  end
  return {1, t}
end
local qt = tonumber(ARGV[6])
if qt > 0 then
  q_join(KEYS[3], KEYS[4], member, clock(), qt)
end
return {0, redis.call('PTTL', KEYS[1])}
