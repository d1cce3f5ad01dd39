-- multi_acquire.lua: take a MultiLock's members (Lock-shaped hashes, see
-- reentrant_hash.lua) all at once, or none: used when every member key is in
-- one hash slot (or on a standalone server).
--
-- KEYS[4i-3]  lock key of member i (in canonical order)
-- KEYS[4i-2]  fence counter of member i (of its hash slot: see fence.lua)
-- KEYS[4i-1]  queue key of member i (read only by its release)
-- KEYS[4i]    timeouts key of member i
-- ARGV[1]     owner (32 hex chars)
-- ARGV[2]     operation id, unique to one Acquire call
-- ARGV[3]     lease in milliseconds
-- ARGV[4]     holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]     the caller's clock in microseconds (decimal digits; see fence.lua)
--
-- Returns {1, fence}      every member granted (count 1, a new fence) or
--                         re-entered by this owner (count + 1); fence is the
--                         largest of the members' fences. A member where this
--                         operation was already applied (a retry) is left as it is.
--         {0, pttl, i}    member i is held by another owner (pttl: its
--                         remaining TTL in ms, -1: none); nothing was changed
--                         but member i's waiters mark (reentrant_wait)
-- Errors  WRONGTYPE       a member key is not a hash of a lock
local n = #KEYS / 4
local fields = {}
for i = 1, n do
  local f, foreign = reentrant_fields(redis.call('HGETALL', KEYS[4 * i - 3]))
  if foreign then
    return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
  end
  if f.o and f.o ~= ARGV[1] then
    reentrant_wait(KEYS[4 * i - 3], f)
    return {0, redis.call('PTTL', KEYS[4 * i - 3]), i}
  end
  fields[i] = f
end
local fence = 0
for i = 1, n do
  local k, f = KEYS[4 * i - 3], fields[i]
  local t
  if not f.o then
    local digits
    t, digits = next_fence(KEYS[4 * i - 2], ARGV[5])
    reentrant_grant(k, digits, '', ARGV[1], ARGV[2], ARGV[4], ARGV[3], false, false)
  else
    t = tonumber(f.t)
    reentrant_reenter(k, f, ARGV[2], ARGV[3])
  end
  if t > fence then
    fence = t
  end
end
return {1, fence}
