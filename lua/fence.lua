-- fence.lua: prepended to every script that grants a lock (not a script of its own).
--
-- refused(pttl) is an acquire script's refusal (a grant answers its fence).
--
-- clock() reads the server time once: milliseconds (the clock that expiries
-- and queue deadlines are kept in), microseconds (for fencing tokens), and
-- the microseconds as decimal digits.
--
-- next_fence(key, ttl_ms) returns the next fencing token for one lock name,
-- and its decimal digits, and stores it in `key` with a TTL of ttl_ms
-- (refreshed on every grant, so an unused name leaves nothing behind for
-- longer than ttl_ms).
-- fence_at(key, ttl_ms, now_us, digits, last) is next_fence with the time
-- already read and, when the caller knows it, the fence of the holder the
-- grant takes over from (nil: unknown).
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
-- exactly; they are written as digits (TIME's own, or %.0f), never with
-- tostring.
-- refused is an acquire script's one-integer refusal: -(pttl + 2), where
-- pttl is the holder's remaining TTL in ms (-1: none); a grant answers its
-- fence, a positive number.
local function refused(pttl)
  return -(pttl + 2)
end

local function clock()
  local t = redis.call('TIME')
  local u = t[2]
  local digits = t[1] .. string.sub('000000', #u + 1) .. u
  return tonumber(t[1]) * 1000 + math.floor(tonumber(u) / 1000), tonumber(digits), digits
end

local function fence_at(key, ttl, now_us, digits, last)
  local t = now_us
  if last and last >= t then
    t = last + 1
    digits = string.format('%.0f', t)
  end
  local old = tonumber(redis.call('SET', key, digits, 'PX', ttl, 'GET'))
  if old and old >= t then
    t = old + 1
    digits = string.format('%.0f', t)
    redis.call('SET', key, digits, 'PX', ttl)
  end
  return t, digits
end

local function next_fence(key, ttl)
  local _, now_us, digits = clock()
  return fence_at(key, ttl, now_us, digits, nil)
end
