-- inspect_lib.lua: prepended to the shapes' inspect scripts (not a script of
-- its own).
--
-- Every shape answers Inspect in one normalized reply, so that the client
-- knows no shape's layout:
--
--   {shape, ttl_ms, last_fence, permits,
--    nh, id, meta, count, fence, mode, ttl_ms, ... (nh holders),
--    nw, id, meta, mode, deadline_ms, ... (nw waiters, next first)}
--
-- shape is '' when nobody holds the lock; ttl_ms is the lock key's PTTL
-- (< 0: none); last_fence is the fence counter (0: none); meta is the holder
-- metadata as the client wrote it; a waiter's deadline is the time left of
-- its place. An inspect script returns false when the keys are not its
-- shape's.

-- i_reply starts the reply of shape for the lock key lock and the fence
-- counter fence.
local function i_reply(shape, lock, fence)
  return {shape, redis.call('PTTL', lock), tonumber(redis.call('GET', fence)) or 0, 0, 0}
end

-- i_holder adds a holder to reply r (before any waiter is added).
local function i_holder(r, id, meta, count, fence, mode, ttl)
  r[5] = r[5] + 1
  r[#r + 1], r[#r + 2], r[#r + 3], r[#r + 4], r[#r + 5], r[#r + 6] = id, meta, count, fence, mode, ttl
end

-- i_waiters ends reply r with the live waiters of a queue zset in order
-- (queue, whose members' deadlines are in timeouts; timeouts nil: the
-- queue's own scores are the deadlines), mode given, at server time now.
local function i_waiters(r, queue, timeouts, mode, now)
  local members
  if timeouts then
    members = redis.call('ZRANGE', queue, 0, -1)
  else
    members = redis.call('ZRANGE', queue, 0, -1, 'WITHSCORES')
  end
  local n = 0
  local out = {}
  local step = 1
  if not timeouts then
    step = 2
  end
  for i = 1, #members, step do
    local m = members[i]
    local deadline
    if timeouts then
      deadline = tonumber(redis.call('ZSCORE', timeouts, m))
    else
      deadline = tonumber(members[i + 1])
    end
    local holder, meta = string.match(m, '^[^|]*|([^|]*)|[^|]*|[^|]*|(.*)$')
    if holder and deadline and deadline > now then
      n = n + 1
      out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] = holder, meta, mode, deadline - now
    end
  end
  r[#r + 1] = n
  for _, v in ipairs(out) do
    r[#r + 1] = v
  end
  return r
end
