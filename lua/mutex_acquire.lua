-- mutex_acquire.lua: grant a Mutex, or queue for it (see mutex_lib.lua).
--
-- KEYS[1]  lock key (string value: token|fence|holder metadata, see mutex_lib.lua)
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  the value a grant writes, as mutex_value makes it: the token (32
--          hex chars, unique to one Acquire call; its first 16 are the
--          call's operation id), '+' if an earlier attempt of this call
--          queued it, '|', the caller's clock in microseconds (decimal
--          digits: the fence, unless the counter is ahead, see fence.lua),
--          '|', the holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  queue timeout in milliseconds, '|', the id of the caller's Client
--          (16 hex chars; hand-offs to this call go to the lock's wake-up
--          channel .. ':' .. id); '0': try once without queueing
--
-- A Redis script's arguments cost the server more than the work of taking
-- them apart: a free Mutex's grant takes what it writes in one.
--
-- A free Mutex goes to the caller, queue or not (a Mutex is not fair; a
-- release hands it to the first waiter, so it is free with waiters queued
-- only after a holder's lease ran out). A free Mutex costs two commands:
-- SET NX and the fence counter's SET ... GET (see fence.lua; the value is
-- written with the clock's fence, and again with the counter's in the rare
-- case that the counter was ahead of the clock); an attempt that finds it
-- held consumes no fence.
--
-- Returns fence > 0   granted; also when the key already holds this token:
--                     it was handed to this call, or this is a retry whose
--                     first reply was lost; the TTL becomes the lease
--         -(pttl + 2) held by someone else (see refused); pttl is the
--                     holder's remaining TTL in ms (-1: the key has no TTL);
--                     unless the queue timeout is 0 the call is queued (or
--                     keeps its place), its deadline now + that timeout
-- Errors  WRONGTYPE   the key exists and is not a string
--
-- The libraries (queue_lib.lua, mutex_lib.lua) are defined at the
-- "--@libraries" line, after the path of a free Mutex: a grant costs no
-- function definitions but fence.lua's.
local queued = string.byte(ARGV[1], 33) == 43 -- '+': a queued caller may have waiters behind it (mutex_lib.lua)
local v = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
local t
if not v then
  local at = 34
  if queued then
    at = 35
  end
  local to = string.find(ARGV[1], '|', at, true)
  local digits = string.sub(ARGV[1], at, to - 1)
  local d
  t, d = next_fence(KEYS[2], digits)
  if d ~= digits then
    redis.call('SET', KEYS[1], string.sub(ARGV[1], 1, at - 1) .. d .. string.sub(ARGV[1], to), 'XX', 'KEEPTTL')
  end
  if not queued then
    return t
  end
end
--@libraries
local token = string.sub(ARGV[1], 1, 32)
local qt, client = string.match(ARGV[3], '^(%d+)|?(.*)$')
local member = q_member(string.sub(token, 1, 16), token, ARGV[2], client, string.match(ARGV[1], '^[^|]*|[^|]*|(.*)$'))
if not v then
  q_leave(KEYS[3], KEYS[4], member)
  return t
end
if string.sub(v, 1, 32) == token then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return mutex_fence(v)
end
qt = tonumber(qt)
if qt > 0 then
  q_join(KEYS[3], KEYS[4], member, clock(), qt)
  mutex_mark(KEYS[1], v)
end
return refused(redis.call('PTTL', KEYS[1]))
