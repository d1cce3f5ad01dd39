-- fence.lua: prepended to every script that grants a lock (not a script of its own).
--
-- clock() reads the server time once: milliseconds (the clock that expiries
-- and queue deadlines are kept in) and microseconds (for fencing tokens).
--
-- Two ways to the next fencing token of one lock name, both kept in the
-- name's counter key with a TTL of ttl_ms, and both strictly increasing
-- while the counter lives:
--
-- next_fence(key, ttl_ms) (RWLock, Semaphore, MultiLock, RedLock) is
-- max(last + 1, server time in microseconds), last read from the counter
-- (TIME, GET and SET; the TTL is refreshed on every grant): tokens follow the
-- server clock, so tokens of different names compare (a MultiLock's token is
-- the largest of its members'). fence_at(key, ttl_ms, now_us, last) is
-- next_fence with the time already read and, when the caller knows it, the
-- last token granted for the name; last = nil reads the counter.
--
-- fence_next(key, ttl_ms, last) (Mutex, Lock, FairLock: the common path
-- costs one command) is INCR of the counter. When the counter is missing
-- (never used, its TTL ran out, FLUSHALL, a failover that lost it) INCR
-- answers 1, and the counter starts again from a floor: the server time in
-- microseconds, or last + 1 if that is larger (last: the fence of the holder
-- the grant takes over from, when the caller knows it; nil otherwise); the
-- counter then lives ttl_ms from that floor (INCR does not refresh it). A
-- counter below last + 1 is raised the same way.
--
-- After the counter was lost, tokens still increase as long as the server
-- clock has not gone back by more than the time since the lost grant: a
-- next_fence counter follows the clock, and a fence_next counter starts at
-- the clock and goes up by one per script call that touches it (a script
-- call takes longer than a microsecond, so it does not run ahead of the
-- clock). Numbers stay below 2^53, so Lua's doubles hold them exactly; they
-- are always formatted with %.0f, never with tostring.
local function clock()
  local t = redis.call('TIME')
  local s, u = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(u / 1000), s * 1000000 + u
end

local function fence_at(key, ttl, now_us, last)
  if not last then
    last = tonumber(redis.call('GET', key))
  end
  local t = now_us
  if last and last >= t then
    t = last + 1
  end
  redis.call('SET', key, string.format('%.0f', t), 'PX', ttl)
  return t
end

local function next_fence(key, ttl)
  local _, now_us = clock()
  return fence_at(key, ttl, now_us, nil)
end

local function fence_next(key, ttl, last)
  local t = redis.call('INCR', key)
  if t == 1 or (last and t <= last) then
    local _, now_us = clock()
    t = now_us
    if last and last >= t then
      t = last + 1
    end
    redis.call('SET', key, string.format('%.0f', t), 'PX', ttl)
  end
  return t
end
