-- rw_read_extend.lua: set one read hold's remaining lease, only if it is still live (renewal and Extend).
--
-- KEYS[1]  readers key
-- KEYS[2]  holds key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  new lease in milliseconds
--
-- Returns 1  extended: the hold expires ARGV[2] ms from now
--         0  not ours: no live read hold of this owner; nothing changed
-- Errors  WRONGTYPE   a key holds another type
local now = server_ms()
local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not score or score <= now or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
keep(KEYS[1], ARGV[2])
keep(KEYS[2], ARGV[2])
return 1
