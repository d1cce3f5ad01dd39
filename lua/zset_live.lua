-- zset_live.lua: is a hold kept as a zset member with its expiry as score still live? (Verify)
--
-- KEYS[1]  zset of holder id -> expiry in server ms (RWLock readers, Semaphore permits)
-- ARGV[1]  holder id
--
-- Returns 1  ARGV[1] is a member whose expiry is still ahead
--         0  it is not (gone, or expired and not yet purged)
-- Errors  WRONGTYPE   the key holds another type
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if score and score > server_ms() then
  return 1
end
return 0
