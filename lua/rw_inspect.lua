-- rw_inspect.lua: an RWLock's answer to Inspect (see inspect_lib.lua and
-- rw_lib.lua).
--
-- KEYS[1]  lock key (the writer's hash)
-- KEYS[2]  fence counter
-- KEYS[3]  readers key
-- KEYS[4]  holds key
-- KEYS[5]  writers key (waiting writers)
--
-- Returns the normalized reply (shape 'rw': its writer and readers as
-- holders, its waiting writers as waiters), or false when nothing of an
-- RWLock is there.
local now = server_ms()
local typ = redis.call('TYPE', KEYS[1]).ok
local w
if typ == 'hash' then
  w = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'm', 's')
  if w[5] ~= 'rw' then
    return false
  end
elseif typ ~= 'none' then
  return false
end
local readers = redis.call('ZRANGEBYSCORE', KEYS[3], now + 1, '+inf', 'WITHSCORES')
if not w and #readers == 0 and redis.call('ZCARD', KEYS[5]) == 0 then
  return false
end
local r = i_reply('rw', KEYS[1], KEYS[2])
if w then
  i_holder(r, w[1], w[4] or '', tonumber(w[2]) or 1, tonumber(w[3]) or 0, 'write', r[2])
end
for i = 1, #readers, 2 do
  local v = redis.call('HGET', KEYS[4], readers[i])
  if v then
    local n, _, t, m = rw_hold(v)
    i_holder(r, readers[i], m or '', n or 1, tonumber(t) or 0, 'read', tonumber(readers[i + 1]) - now)
  end
end
return i_waiters(r, KEYS[5], nil, 'write', now)
