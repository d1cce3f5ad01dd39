-- reentrant_inspect.lua: a Lock's or FairLock's answer to Inspect (see
-- inspect_lib.lua).
--
-- KEYS[1]  lock key (hash, see reentrant_lib.lua)
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
--
-- Returns the normalized reply (shape 'lock' or 'fair'; '' when free), or
-- false when the lock key is not a Lock's hash (another type, or an RWLock
-- writer's).
local typ = redis.call('TYPE', KEYS[1]).ok
if typ ~= 'hash' and typ ~= 'none' then
  return false
end
local r = i_reply('', KEYS[1], KEYS[2])
if typ == 'hash' then
  local f = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'm', 's')
  if not f[1] or f[5] == 'rw' then
    return false
  end
  r[1] = f[5] or 'lock'
  i_holder(r, f[1], f[4] or '', tonumber(f[2]) or 1, tonumber(f[3]) or 0, '', r[2])
end
return i_waiters(r, KEYS[3], KEYS[4], '', server_ms())
