-- mutex_extend.lua: set a Mutex's TTL only if it is still ours (renewal and Extend).
--
-- KEYS[1]  lock key
-- ARGV[1]  token of the holder (32 hex chars)
-- ARGV[2]  new TTL in milliseconds
--
-- Returns 1  extended
--         0  not ours: the key is gone or holds another token; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a string
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 32) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
