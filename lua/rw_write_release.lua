-- rw_write_release.lua: release one write hold of an RWLock (see rw_lib.lua).
--
-- KEYS[1]  lock key (the writer)
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[3]  wake-up channel
--
-- Returns 1  released: the count reached 0, the key was deleted and every
--            waiter woken ("a": readers all get in, unless a writer waits)
--         2  still held by this owner: the count was decremented (or this
--            operation was already applied: a retry changes nothing)
--         0  not ours: the key is gone or has another owner; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a hash
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return 0
end
if redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
  return 2
end
if redis.call('HINCRBY', KEYS[1], 'n', -1) > 0 then
  redis.call('HSET', KEYS[1], 'x', ARGV[2])
  return 2
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'a')
return 1
