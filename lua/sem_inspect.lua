-- sem_inspect.lua: a Semaphore's answer to Inspect (see inspect_lib.lua and
-- sem_acquire.lua).
--
-- KEYS[1]  permits key (zset permit id -> expiry)
-- KEYS[2]  data key
-- KEYS[3]  fence counter
-- KEYS[4]  count key
--
-- Returns the normalized reply (shape 'semaphore', its live permits as
-- holders, its count as permits), or false when the name has no
-- semaphore.
local typ = redis.call('TYPE', KEYS[1]).ok
local count = tonumber(redis.call('GET', KEYS[4]))
if typ ~= 'zset' and not (typ == 'none' and count) then
  return false
end
local now = server_ms()
local r = i_reply('semaphore', KEYS[1], KEYS[3])
r[2] = -1 -- every permit has its own lease
r[4] = count or 0
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now + 1, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local fence, meta = string.match(redis.call('HGET', KEYS[2], live[i]) or '', '^(%d+)|(.*)$')
  i_holder(r, live[i], meta or '', 1, tonumber(fence) or 0, '', tonumber(live[i + 1]) - now)
end
r[#r + 1] = 0
return r
