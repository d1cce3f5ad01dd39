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
-- live waiter (who alone is notified), or the key is deleted.
local function mutex_hand_on(lock, fence, queue, timeouts, v, wake, fence_ttl)
  local op, holder, ttl, client, meta, _, now_us = q_pop(queue, timeouts)
  if not op then
    redis.call('DEL', lock)
    return
  end
  local t = fence_at(fence, fence_ttl, now_us, mutex_fence(v))
  redis.call('SET', lock, holder .. '|' .. string.format('%.0f', t) .. '|' .. meta, 'PX', ttl)
  q_notify(wake, client, op, t, ttl)
end
