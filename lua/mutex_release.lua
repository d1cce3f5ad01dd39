-- mutex_release.lua: release a Mutex only if it is still ours, then wake one waiter.
--
-- KEYS[1]  lock key
-- ARGV[1]  token of the holder (32 hex chars)
-- ARGV[2]  wake-up channel
--
-- Returns 1  released (key deleted, wake-up published)
--         0  not ours: the key is gone or holds another token; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a string
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 32) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0
