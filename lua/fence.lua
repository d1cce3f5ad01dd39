-- fence.lua: prepended to every script that grants a lock (not a script of its own).
--
-- next_fence(key, ttl_ms) returns the next fencing token for one lock name and
-- stores it in `key` with a TTL of ttl_ms (refreshed on every grant, so an
-- unused name leaves nothing behind for longer than ttl_ms).
--
-- The token is max(last + 1, server time in microseconds): strictly increasing
-- while the counter lives, and still increasing after the counter was lost
-- (TTL, FLUSHALL, a failover that lost the last write) as long as the server
-- clock has not gone back by more than the time since the lost grant.
-- Numbers stay below 2^53, so Lua's doubles hold them exactly; they are always
-- formatted with %.0f, never with tostring.
local function next_fence(key, ttl)
  local now = redis.call('TIME')
  local t = tonumber(now[1]) * 1000000 + tonumber(now[2])
  local last = tonumber(redis.call('GET', key))
  if last and last >= t then
    t = last + 1
  end
  redis.call('SET', key, string.format('%.0f', t), 'PX', ttl)
  return t
end
