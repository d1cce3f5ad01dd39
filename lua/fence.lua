-- fence.lua: prepended to every script that grants a lock (not a script of its own).
--
-- refused(pttl) is an acquire script's refusal (a grant answers its fence).
--
-- clock() reads the server time once: milliseconds (the clock that expiries
-- and queue deadlines are kept in), microseconds, and the microseconds as
-- decimal digits.
--
-- fence_at(key, now_us, digits, last) returns the next fencing token and
-- its decimal digits, and stores it in the fence counter `key`: now_us is a
-- clock in microseconds (digits: the same number as decimal digits), last
-- the fence of the holder the grant takes over from (nil: unknown).
-- next_fence(key, digits) is fence_at with the clock given as digits alone
-- (an acquire script's ARGV: the caller's clock) and no last.
--
-- The fence counter is one key per Redis Cluster hash slot, in the slot of
-- the locks it serves (every lock name of that slot shares it), without a
-- TTL: at most 16384 keys, however many names are locked. The token is
-- max(last + 1, counter + 1, clock), written with one SET ... GET (the
-- counter's old value comes back with it; only when the counter was ahead
-- of the clock is it written a second time): strictly increasing for every
-- name of the slot while the counter lives, and still increasing after the
-- counter was lost or went back (FLUSHALL, a restart without persistence, a
-- failover that lost the last writes) as long as the clock that grants
-- next is not behind the one of the lost grant by more than the time since
-- it. The clock is the caller's on a free lock's path (the client's clock:
-- a script that reads TIME costs the server more), the server's on a
-- hand-off. Tokens follow the clock, so tokens of different names compare
-- (a MultiLock's token is the largest of its members'). Numbers stay below
-- 2^53, so Lua's doubles hold them exactly; they are written as digits (the
-- clock's own, or %.0f), never with tostring.
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

local function fence_at(key, now_us, digits, last)
  local t = now_us
  if last and last >= t then
    t = last + 1
    digits = string.format('%.0f', t)
  end
  local old = tonumber(redis.call('SET', key, digits, 'GET'))
  if old and old >= t then
    t = old + 1
    digits = string.format('%.0f', t)
    redis.call('SET', key, digits)
  end
  return t, digits
end

local function next_fence(key, digits)
  return fence_at(key, tonumber(digits), digits, nil)
end
