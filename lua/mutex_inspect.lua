-- mutex_inspect.lua: a Mutex's answer to Inspect (see inspect_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
--
-- Returns the normalized reply (shape 'mutex', or '' when free), or false
-- when the lock key holds something that is not a Mutex.
local typ = redis.call('TYPE', KEYS[1]).ok
if typ ~= 'string' and typ ~= 'none' then
  return false
end
local r = i_reply('', KEYS[1], KEYS[2])
if typ == 'string' then
  local token, fence, meta = string.match(redis.call('GET', KEYS[1]), '^(%x+)%+?|(%d+)|(.*)$')
  if not token or #token ~= 32 then
    return false
  end
  r[1] = 'mutex'
  i_holder(r, token, meta, 1, tonumber(fence), '', r[2])
end
return i_waiters(r, KEYS[3], KEYS[4], '', server_ms())
