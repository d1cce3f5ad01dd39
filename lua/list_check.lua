-- list_check.lua: a Lister's check of which locks still hold the grant it
-- last read (see lister.go), many locks in one call (not on a Cluster: the
-- keys are of many slots).
--
-- KEYS[k]  the k-th lock's lock key
-- ARGV[k]  the grant the caller last read of it: 's<fence>' (a Mutex's
--          string) or 'h<fence>|<count>' (a Lock's or FairLock's hash: its
--          fence and re-entry count)
--
-- Returns one integer per lock, in order: the lock key's PTTL (-1: none)
-- when it still holds that grant (a fence is never given to two grants),
-- else -3 (read it whole).
local out = {}
for k = 1, #KEYS do
  local lock, kind, grant = KEYS[k], string.sub(ARGV[k], 1, 1), string.sub(ARGV[k], 2)
  local same = false
  if kind == 's' then
    local v = redis.pcall('GET', lock)
    same = type(v) == 'string' and string.match(v, '^%x+%+?|(%d+)|') == grant
  elseif kind == 'h' then
    local f = redis.pcall('HMGET', lock, 't', 'n', 's')
    same = type(f[1]) == 'string' and f[3] ~= 'rw' and f[1] .. '|' .. (f[2] or '1') == grant
  end
  if same then
    out[k] = redis.call('PTTL', lock)
  else
    out[k] = -3
  end
end
return out
