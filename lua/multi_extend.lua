-- multi_extend.lua: set the TTL of every member of a MultiLock whose keys share a slot, only if all are still ours.
--
-- KEYS[i]  lock key of member i
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  new TTL in milliseconds
--
-- Returns 1  every member extended
--         0  some member is no longer ours; nothing changed
-- Errors  WRONGTYPE   a member key exists and is not a hash
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'o') ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
