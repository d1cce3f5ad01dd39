-- sem_extend.lua: set one Semaphore permit's remaining lease, only if it is still live (renewal and Extend).
--
-- KEYS[1]  permits key
-- KEYS[2]  data key
-- ARGV[1]  permit id
-- ARGV[2]  new lease in milliseconds
--
-- Returns 1  extended: the permit expires ARGV[2] ms from now
--         0  not ours: the permit is gone or its lease ran out; nothing changed
-- Errors  WRONGTYPE   a key holds another type
local now = server_ms()
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score or score <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
keep(KEYS[1], ARGV[2])
keep(KEYS[2], ARGV[2])
return 1
