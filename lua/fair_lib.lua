-- fair_lib.lua: prepended to the FairLock scripts after fence.lua and lib.lua
-- (not a script of its own).
--
-- A FairLock is, in the slot of {name}:
--   lock key      hash {s = 'fair', o = owner, n = hold count, t = fence,
--                 m = holder metadata, x = id of the last operation applied,
--                 h = operation id of the Acquire call the lock was handed to}
--   queue key     zset member -> arrival number: the waiters in FIFO order
--   timeouts key  zset member -> liveness deadline (server ms): a waiter that
--                 has not refreshed its place by then is evicted
-- A member is "op|owner|lease-ms|client|holder metadata": one waiting Acquire
-- call; client is the id of its Client, which listens for hand-offs on the
-- wake channel + ':' + client (only that Client receives the message).

-- fair_evict removes waiters whose deadline has passed.
local function fair_evict(queue, timeouts, now)
  local dead = redis.call('ZRANGEBYSCORE', timeouts, '-inf', now, 'LIMIT', 0, 100)
  if #dead > 0 then
    redis.call('ZREM', queue, unpack(dead))
    redis.call('ZREM', timeouts, unpack(dead))
  end
end

-- fair_grant makes owner the holder of the free lock for ttl ms, with a new
-- fence; handoff is the operation id of the Acquire call it is handed to, or
-- false when that call is the one running.
local function fair_grant(lock, fence, fence_ttl, owner, op, meta, ttl, handoff)
  local t = next_fence(fence, fence_ttl)
  redis.call('HSET', lock, 's', 'fair', 'o', owner, 'n', 1, 't', string.format('%.0f', t), 'm', meta, 'x', op)
  if handoff then
    redis.call('HSET', lock, 'h', op)
  end
  redis.call('PEXPIRE', lock, ttl)
  return t
end

-- fair_handoff hands the free lock to the first live waiter: it leaves the
-- queue and becomes the holder with a TTL of what is left of its liveness
-- deadline (at most its lease), so a waiter that died in the meantime blocks
-- no one past that deadline; its Acquire call claims the full lease with its
-- next attempt. The waiter's op id is published on its Client's channel
-- (wake .. ':' .. client): only that waiter wakes. Returns true if the lock
-- was handed to someone.
local function fair_handoff(lock, fence, queue, timeouts, wake, now, fence_ttl)
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return false
    end
    local deadline = tonumber(redis.call('ZSCORE', timeouts, head))
    redis.call('ZREM', queue, head)
    redis.call('ZREM', timeouts, head)
    local op, owner, lease, client, meta = string.match(head, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
    -- a dead or malformed member is dropped, and the next one gets its turn
    if op and tonumber(lease) and deadline and deadline > now then
      fair_grant(lock, fence, fence_ttl, owner, op, meta, math.min(tonumber(lease), deadline - now), true)
      redis.call('PUBLISH', wake .. ':' .. client, op)
      return true
    end
  end
end
