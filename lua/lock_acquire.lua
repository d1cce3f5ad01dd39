-- lock_acquire.lua: grant or re-enter a reentrant Lock.
--
-- KEYS[1]  lock key: a hash {o = owner, n = hold count, t = fence, m = holder
--          metadata, x = id of the last operation applied}
-- KEYS[2]  fence counter
-- ARGV[1]  owner (32 hex chars; carried by the caller's context)
-- ARGV[2]  operation id, unique to one Acquire call
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  fence counter TTL in milliseconds
--
-- Returns {1, fence, count}  granted (count 1) or re-entered (count + 1, same
--                            fence; the TTL is raised to at least ARGV[3]).
--                            A retry of an operation already applied (same
--                            ARGV[2]) changes nothing and returns the same.
--         {0, pttl}          held by another owner; pttl in ms (-1: no TTL);
--                            the hash gets the waiters mark w (see
--                            reentrant_lib.lua)
-- Errors  WRONGTYPE          the key is not a hash of this shape
local f = redis.call('HMGET', KEYS[1], 'o', 's', 'w')
local o = f[1]
if not o then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
  end
  local t, digits = next_fence(KEYS[2], ARGV[5])
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 't', digits, 'm', ARGV[4], 'x', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, t, 1}
end
if o ~= ARGV[1] then
  if f[2] ~= 'rw' and not f[3] then
    redis.call('HSET', KEYS[1], 'w', '1') -- a Lock's release must wake us (reentrant_lib.lua)
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
local t = tonumber(redis.call('HGET', KEYS[1], 't'))
if redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
  return {1, t, tonumber(redis.call('HGET', KEYS[1], 'n'))}
end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], 'x', ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {1, t, n}
