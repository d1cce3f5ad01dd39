-- queue_lib.lua: the waiter queue of the locks that hand themselves over
-- (Mutex, Lock, FairLock); prepended after fence.lua, not a script of its own.
--
-- Next to the lock key, in the slot of {name}:
--   queue key     zset member -> arrival number: the waiters in FIFO order
--   timeouts key  zset member -> liveness deadline (server ms): a waiter that
--                 has not refreshed its place by then is skipped when it
--                 reaches the head
-- A member is "op|holder|lease-ms|client|holder metadata": one waiting
-- Acquire call. client is the id of its Client, which listens on the lock's
-- wake channel .. ':' .. client, so a hand-off wakes that Client alone.
--
-- A release hands the lock straight to the first live waiter (it holds the
-- lock before it knows) for its lease, at most what is left of its deadline,
-- so a waiter that died in the meantime blocks no one for longer; and
-- publishes "op|fence|ttl-ms" to it: the waiter needs no further round trip.

-- q_join puts member at the end of the queue, or keeps the place it has;
-- either way its deadline becomes now + qt.
local function q_join(queue, timeouts, member, now, qt)
  local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
  local seq = 1
  if last[2] then
    seq = tonumber(last[2]) + 1
  end
  redis.call('ZADD', queue, 'NX', seq, member)
  redis.call('ZADD', timeouts, now + qt, member)
  if redis.call('PTTL', queue) < qt then
    redis.call('PEXPIRE', queue, 2 * qt)
    redis.call('PEXPIRE', timeouts, 2 * qt)
  end
end

-- q_leave removes member from the queue.
local function q_leave(queue, timeouts, member)
  redis.call('ZREM', queue, member)
  redis.call('ZREM', timeouts, member)
end

-- q_pop removes waiters from the head up to the first live one and returns
-- it: op, holder, the lease to grant it (ms), its client and metadata, and
-- the server time (ms, us) it read; nil when no live waiter is left (a dead
-- or malformed member is dropped, and the next one gets its turn).
local function q_pop(queue, timeouts)
  local now_ms, now_us
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    if not now_ms then
      now_ms, now_us = clock()
    end
    local deadline = tonumber(redis.call('ZSCORE', timeouts, head))
    q_leave(queue, timeouts, head)
    local op, holder, lease, client, meta = string.match(head, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
    if op and tonumber(lease) and deadline and deadline > now_ms then
      return op, holder, math.min(tonumber(lease), deadline - now_ms), client, meta, now_ms, now_us
    end
  end
end

-- q_notify tells the waiter's Client that op was handed the lock with this
-- fence for ttl ms.
local function q_notify(wake, client, op, fence, ttl)
  redis.call('PUBLISH', wake .. ':' .. client, op .. '|' .. string.format('%.0f', fence) .. '|' .. ttl)
end
