-- lock_extend.lua: set a reentrant Lock's TTL only if this owner holds it (renewal and Extend).
--
-- KEYS[1]  lock key (hash, see lock_acquire.lua)
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  new TTL in milliseconds
--
-- Returns 1  extended
--         0  not ours: the key is gone or has another owner; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a hash
if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
