-- multi_acquire.lua: take a MultiLock's members (reentrant Lock hashes, see
-- lock_acquire.lua) all at once, or none: used when every member key is in
-- one hash slot (or on a standalone server).
--
-- KEYS[2i-1]  lock key of member i (in canonical order)
-- KEYS[2i]    fence counter of member i
-- ARGV[1]     owner (32 hex chars)
-- ARGV[2]     operation id, unique to one Acquire call
-- ARGV[3]     lease in milliseconds
-- ARGV[4]     holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]     fence counter TTL in milliseconds
--
-- Returns {1, fence}      every member granted (count 1, a new fence) or
--                         re-entered by this owner (count + 1); fence is the
--                         largest of the members' fences. A member where this
--                         operation was already applied (a retry) is left as it is.
--         {0, pttl, i}    member i is held by another owner (pttl: its
--                         remaining TTL in ms, -1: none); nothing was changed
--                         but member i's waiters mark w (see reentrant_lib.lua)
-- Errors  WRONGTYPE       a member key is not a hash of this shape
local n = #KEYS / 2
for i = 1, n do
  local f = redis.call('HMGET', KEYS[2 * i - 1], 'o', 's', 'w')
  local o = f[1]
  if not o then
    if redis.call('EXISTS', KEYS[2 * i - 1]) == 1 then
      return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
    end
  elseif o ~= ARGV[1] then
    if f[2] ~= 'rw' and not f[3] then
      redis.call('HSET', KEYS[2 * i - 1], 'w', '1') -- a Lock's release must wake us (reentrant_lib.lua)
    end
    return {0, redis.call('PTTL', KEYS[2 * i - 1]), i}
  end
end
local fence = 0
for i = 1, n do
  local k = KEYS[2 * i - 1]
  local t
  if not redis.call('HGET', k, 'o') then
    local digits
    t, digits = next_fence(KEYS[2 * i], ARGV[5])
    redis.call('HSET', k, 'o', ARGV[1], 'n', 1, 't', digits, 'm', ARGV[4], 'x', ARGV[2])
    redis.call('PEXPIRE', k, ARGV[3])
  else
    t = tonumber(redis.call('HGET', k, 't'))
    if redis.call('HGET', k, 'x') ~= ARGV[2] then
      redis.call('HINCRBY', k, 'n', 1)
      redis.call('HSET', k, 'x', ARGV[2])
      if redis.call('PTTL', k) < tonumber(ARGV[3]) then
        redis.call('PEXPIRE', k, ARGV[3])
      end
    end
  end
  if t > fence then
    fence = t
  end
end
return {1, fence}
