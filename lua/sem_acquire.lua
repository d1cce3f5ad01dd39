-- sem_acquire.lua: take k permits of a Semaphore, all or none.
--
-- A Semaphore is, in the slot of {name}:
--   permits key  zset permit id -> expiry (server ms): every permit has its
--                own lease, so a crashed holder's permit returns by itself
--   data key     hash permit id -> "fence|holder metadata"
--   count key    the permit count: set by the first acquisition that finds
--                none (or by Semaphore.SetPermits); it lives for ARGV[5]
--                after the last grant
--
-- KEYS[1]  permits key
-- KEYS[2]  data key
-- KEYS[3]  fence counter (of the semaphore's hash slot: see fence.lua)
-- KEYS[4]  count key
-- ARGV[1]  number of permits the caller's Semaphore has
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[4]  the caller's clock in microseconds (decimal digits; see fence.lua)
-- ARGV[5]  how long the count key lives after the last grant, in milliseconds
-- ARGV[6..5+k]  ids of the k permits to take (32 hex chars each)
--
-- Returns {1, fence1, ..., fencek}  granted, one new fence per permit; also
--                                   when ARGV[6] is already a permit (a retry
--                                   of this same call): the same fences
--         {0, ms, pass}             too few free permits; ms until enough
--                                   leases run out (-1: unknown); pass = 1
--                                   when some permits are free (a smaller
--                                   request may fit)
-- Errors  WRONGTYPE                 a key holds another type
--         PERMITS <n> <ARGV[1]>     the store keeps n permits, not ARGV[1]:
--                                   nothing was changed
local cap = tonumber(redis.call('GET', KEYS[4]))
if cap and cap ~= tonumber(ARGV[1]) then
  return redis.error_reply('PERMITS ' .. cap .. ' ' .. ARGV[1])
end
cap = tonumber(ARGV[1])
local now = server_ms()
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
  redis.call('HDEL', KEYS[2], unpack(dead))
end
local k = #ARGV - 5
local res = {1}
if redis.call('ZSCORE', KEYS[1], ARGV[6]) then
  for i = 1, k do
    local v = redis.call('HGET', KEYS[2], ARGV[5 + i]) or ''
    res[#res + 1] = tonumber(string.match(v, '^(%d+)|')) or 0
  end
  return res
end
local used = redis.call('ZCARD', KEYS[1])
if used + k > cap then
  local pass = 0
  if used < cap then
    pass = 1
  end
  local nth = redis.call('ZRANGE', KEYS[1], used + k - cap - 1, used + k - cap - 1, 'WITHSCORES')
  if nth[2] then
    return {0, tonumber(nth[2]) - now, pass}
  end
  return {0, -1, pass}
end
local expiry = now + tonumber(ARGV[2])
for i = 1, k do
  local _, t = next_fence(KEYS[3], ARGV[4])
  redis.call('ZADD', KEYS[1], expiry, ARGV[5 + i])
  redis.call('HSET', KEYS[2], ARGV[5 + i], t .. '|' .. ARGV[3])
  res[#res + 1] = tonumber(t)
end
redis.call('SET', KEYS[4], cap, 'PX', ARGV[5])
keep(KEYS[1], ARGV[2])
keep(KEYS[2], ARGV[2])
return res
