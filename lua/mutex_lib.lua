-- mutex_lib.lua: prepended to the Mutex scripts after fence.lua and
-- queue_lib.lua (not a script of its own).
--
-- A Mutex is a string key "token|fence|holder metadata" with the lease as its
-- TTL, and a waiter queue (see queue_lib.lua).

-- mutex_fence returns the fence stored in a Mutex value.
local function mutex_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|'))
end

-- mutex_hand_on gives up the Mutex whose value is v: it goes to the first
-- live waiter whose Client listens (see q_hand), or the key is deleted.
local function mutex_hand_on(lock, fence, queue, timeouts, v, wake, fence_ttl, check)
  local handed = q_hand(queue, timeouts, fence, fence_ttl, mutex_fence(v), wake, check, nil,
    function(holder, op, meta, ttl, t)
      redis.call('SET', lock, holder .. '|' .. string.format('%.0f', t) .. '|' .. meta, 'PX', ttl)
    end)
  if not handed then
    redis.call('DEL', lock)
  end
end
