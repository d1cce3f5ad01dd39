-- mutex_acquire.lua: grant a Mutex, or queue for it (see mutex_lib.lua).
--
-- KEYS[1]  lock key (string value: token|fence|holder metadata, see mutex_lib.lua)
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  token: 32 hex chars, unique to one Acquire call
-- ARGV[2]  operation id of the Acquire call (16 hex chars)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  the caller's clock in microseconds (decimal digits; see fence.lua)
-- ARGV[6]  queue timeout in milliseconds; 0: try once without queueing
-- ARGV[7]  id of the caller's Client (16 hex chars; hand-offs to this call go
--          to the lock's wake-up channel .. ':' .. ARGV[7])
-- ARGV[8]  '1' if an earlier attempt of this call queued it, else '0'
--
-- A free Mutex goes to the caller, queue or not (a Mutex is not fair; a
-- release hands it to the first waiter, so it is free with waiters queued
-- only after a holder's lease ran out). A free Mutex costs two commands:
-- SET NX and the fence counter's SET ... GET (see fence.lua; the value is
-- written with the clock's fence, and again with the counter's in the rare
-- case that the counter was ahead of the clock); an attempt that finds it
-- held consumes no fence.
--
-- Returns fence > 0   granted; also when the key already holds ARGV[1]: it was
--                     handed to this call, or this is a retry whose first
--                     reply was lost; the TTL becomes the lease
--         -(pttl + 2) held by someone else (see refused); pttl is the
--                     holder's remaining TTL in ms (-1: the key has no TTL);
--                     unless ARGV[6] is 0 the call is queued (or keeps its
--                     place), its deadline now + ARGV[6]
-- Errors  WRONGTYPE   the key exists and is not a string
--
-- The libraries (queue_lib.lua, mutex_lib.lua) are defined at the
-- "--@libraries" line, after the path of a free Mutex: a grant costs no
-- function definitions but fence.lua's.
local digits = ARGV[5]
local queued = ARGV[8] == '1'
local mark = ''
if queued then
  mark = '+' -- a queued caller may have waiters behind it (mutex_lib.lua)
end
-- the value mutex_value (mutex_lib.lua) makes
local v = redis.call('SET', KEYS[1], ARGV[1] .. mark .. '|' .. digits .. '|' .. ARGV[4], 'NX', 'GET', 'PX', ARGV[3])
local t
if not v then
  local d
  t, d = next_fence(KEYS[2], digits)
  if d ~= digits then
    redis.call('SET', KEYS[1], ARGV[1] .. mark .. '|' .. d .. '|' .. ARGV[4], 'XX', 'KEEPTTL')
  end
  if not queued then
    return t
  end
end
--@libraries
if not v then
  q_leave(KEYS[3], KEYS[4], q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[7], ARGV[4]))
  return t
end
if string.sub(v, 1, 32) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return mutex_fence(v)
end
local qt = tonumber(ARGV[6])
if qt > 0 then
  q_join(KEYS[3], KEYS[4], q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[7], ARGV[4]), clock(), qt)
  mutex_mark(KEYS[1], v)
end
return refused(redis.call('PTTL', KEYS[1]))
