-- lock_release.lua: release one hold of a reentrant Lock.
--
-- KEYS[1]  lock key (hash, see lock_acquire.lua)
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[3]  wake-up channel; '' publishes nothing (a failed RedLock attempt
--          giving back a partial grant: waking waiters for it only adds
--          attempts that fail the same way)
--
-- Returns 1  released: the count reached 0, the key was deleted and one waiter woken
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
if ARGV[3] ~= '' then
  redis.call('PUBLISH', ARGV[3], '1')
end
return 1
