-- multi_release.lua: release one hold of every member of a MultiLock whose keys share a slot.
--
-- KEYS[i]  lock key of member i
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[2+i]  wake-up channel of member i
--
-- Every member this owner holds is released as lock_release.lua does (count
-- decremented; at 0 the key is deleted and one waiter of that member woken),
-- also when other members are no longer ours.
--
-- Returns 1  every member was ours and is now free
--         2  every member was ours; some are still held by this owner
--            (re-entered), or this operation was already applied
--         0  some member was no longer ours (the others were released)
-- Errors  WRONGTYPE   a member key exists and is not a hash
local lost, held = false, false
for i = 1, #KEYS do
  local k = KEYS[i]
  if redis.call('HGET', k, 'o') ~= ARGV[1] then
    lost = true
  elseif redis.call('HGET', k, 'x') == ARGV[2] then
    held = true
  elseif redis.call('HINCRBY', k, 'n', -1) > 0 then
    redis.call('HSET', k, 'x', ARGV[2])
    held = true
  else
    redis.call('DEL', k)
    redis.call('PUBLISH', ARGV[2 + i], '1')
  end
end
if lost then
  return 0
end
if held then
  return 2
end
return 1
