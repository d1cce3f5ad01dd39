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
-- publishes "op|fence|ttl-ms" to it: the waiter needs no further round trip
-- (see q_hand).

-- q_member is the member of one waiting Acquire call.
local function q_member(op, holder, lease, client, meta)
  return op .. '|' .. holder .. '|' .. lease .. '|' .. client .. '|' .. meta
end

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

-- q_hand hands the lock to the first live waiter whose Client listens: it
-- publishes "op|fence|ttl-ms" on wake .. ':' .. client and, if the message
-- reached a subscriber (or check is not '1': on a Cluster the count covers
-- one node only), takes the waiter out of the queue and calls
-- grant(holder, op, meta, ttl, fence) to write the grant. A dead or malformed
-- member is dropped; a live one nobody listens for (its Client is gone, cut
-- off, or not subscribed yet) keeps its place and the next one is tried.
-- grant's fence comes as its decimal digits.
-- The ttl is the waiter's lease, at most what is left of its deadline; last
-- is the fence of the holder it takes over from (nil: unknown).
-- Returns true (handed), 'self' (the first live waiter is self_op, taken out
-- of the queue, nothing published or granted) or false (nobody to hand to).
local function q_hand(queue, timeouts, fence, last, wake, check, self_op, grant)
  local i = 0
  local now_ms, now_us, now_digits
  while true do
    local member = redis.call('ZRANGE', queue, i, i)[1]
    if not member then
      return false
    end
    if not now_ms then
      now_ms, now_us, now_digits = clock()
    end
    local deadline = tonumber(redis.call('ZSCORE', timeouts, member))
    local op, holder, lease, client, meta = string.match(member, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
    if not (op and tonumber(lease) and deadline and deadline > now_ms) then
      q_leave(queue, timeouts, member)
    elseif op == self_op then
      q_leave(queue, timeouts, member)
      return 'self'
    else
      local ttl = math.min(tonumber(lease), deadline - now_ms)
      local t, digits = fence_at(fence, now_us, now_digits, last)
      last = t
      local n = redis.call('PUBLISH', wake .. ':' .. client, op .. '|' .. digits .. '|' .. ttl)
      if n > 0 or check ~= '1' then
        q_leave(queue, timeouts, member)
        grant(holder, op, meta, ttl, digits)
        return true
      end
      i = i + 1
    end
  end
end
