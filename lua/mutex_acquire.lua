-- mutex_acquire.lua: grant a Mutex (a plain string key, SET NX PX).
--
-- KEYS[1]  lock key (string value: token|fence|holder metadata)
-- KEYS[2]  fence counter
-- ARGV[1]  token: 32 hex chars, unique to one Acquire call
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[4]  fence counter TTL in milliseconds
--
-- Returns {1, fence}  granted; also when the key already holds ARGV[1] (a retry
--                     of this same call whose first reply was lost): the lease
--                     is refreshed and the same fence returned
--         {0, pttl}   held by someone else; pttl is the holder's remaining TTL
--                     in ms (-1: the key has no TTL)
-- Errors  WRONGTYPE   the key exists and is not a string
local v = redis.call('GET', KEYS[1])
if not v then
  local t = next_fence(KEYS[2], ARGV[4])
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. string.format('%.0f', t) .. '|' .. ARGV[3], 'PX', ARGV[2])
  return {1, t}
end
if string.sub(v, 1, 32) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(string.match(v, '^[^|]*|(%d+)|'))}
end
return {0, redis.call('PTTL', KEYS[1])}
