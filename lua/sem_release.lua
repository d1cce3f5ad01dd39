-- sem_release.lua: give one Semaphore permit back (see sem_acquire.lua).
--
-- KEYS[1]  permits key
-- KEYS[2]  data key
-- ARGV[1]  permit id
-- ARGV[2]  wake-up channel
--
-- Returns 1  released: the permit was live; one waiter is woken ("1")
--         0  unknown permit: never granted, released already, or its lease
--            had run out (it is removed if it was still listed)
-- Errors  WRONGTYPE   a key holds another type
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
redis.call('PUBLISH', ARGV[2], '1')
if score <= server_ms() then
  return 0
end
return 1
