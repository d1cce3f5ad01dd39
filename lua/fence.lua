-- fence.lua: prepended to every script that grants a lock (not a script of its own).
--
-- clock() reads the server time once: milliseconds (the clock that expiries
-- and queue deadlines are kept in) and microseconds (for fencing tokens).
--
-- next_fence(key, ttl_ms) returns the next fencing token for one lock name and
-- stores it in `key` with a TTL of ttl_ms (refreshed on every grant, so an
-- unused name leaves nothing behind for longer than ttl_ms).
-- fence_at(key, ttl_ms, now_us, last) is next_fence with the time already
-- read and, when the caller knows it, the fence of the holder the grant takes
-- over from (nil: unknown).
--
-- The token is max(last + 1, counter + 1, server time in microseconds),
-- written with one SET ... GET (the counter's old value comes back with it;
-- only when the counter was ahead of the clock is it written a second
-- time): strictly increasing while the counter lives, and still increasing
-- after the counter was lost or went back (TTL, FLUSHALL, a failover that
-- lost the last writes) as long as the server clock has not gone back by
-- more than the time since the lost grant. Tokens follow the server clock,
-- so tokens of different names compare (a MultiLock's token is the largest
-- of its members'). Numbers stay below 2^53, so Lua's doubles hold them
-- exactly; they are always formatted with %.0f, never with tostring.
local function clock()
  local t = redis.call('TIME')
  local s, u = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(u / 1000), s * 1000000 + u
end

local function fence_at(key, ttl, now_us, last)
  local t = now_us
  if last and last >= t then
    t = last + 1
  end
  local old = tonumber(redis.call('SET', key, string.format('%.0f', t), 'PX', ttl, 'GET'))
  if old and old >= t then
    t = old + 1
    redis.call('SET', key, string.format('%.0f', t), 'PX', ttl)
  end
  return t
end

local function next_fence(key, ttl)
  local _, now_us = clock()
  return fence_at(key, ttl, now_us, nil)
end
