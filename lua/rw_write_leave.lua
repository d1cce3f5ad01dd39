-- rw_write_leave.lua: a writer's Acquire call gives up (cancelled, Wait ran
-- out, error): it stops waiting, and gives back a grant made to it that it
-- never saw (a reply lost while it was being cancelled) (see rw_lib.lua).
--
-- KEYS[1]  lock key (the writer)
-- KEYS[2]  readers key
-- KEYS[3]  holds key
-- KEYS[4]  writers key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id of the Acquire call
-- ARGV[3]  its member in the writers key (op|owner|lease-ms|client|holder metadata)
-- ARGV[4]  wake-up channel
--
-- Readers that waited only behind this writer are woken ("a") when it was
-- the last waiting writer and no writer holds the lock.
--
-- Returns 1  a grant to this call was given back
--         0  there was none; at most its place among the waiting writers was removed
-- Errors  WRONGTYPE   a key holds another type or shape
local now = server_ms()
local waited = redis.call('ZREM', KEYS[4], ARGV[3])
local undone = 0
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] and redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
  undone = 1
  if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
    redis.call('HSET', KEYS[1], 'x', 'left:' .. ARGV[2])
    return undone
  end
  redis.call('DEL', KEYS[1])
end
rw_purge(KEYS[2], KEYS[3], KEYS[4], now)
if (undone == 1 or waited == 1) and redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[4]) == 0 then
  redis.call('PUBLISH', ARGV[4], 'a')
end
return undone
