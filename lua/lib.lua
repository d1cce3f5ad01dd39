-- lib.lua: prepended to the lock-family scripts (not a script of its own).
--
-- server_ms() returns the server time in milliseconds (the clock that per-hold
-- expiries and queue deadlines are kept in; clients never compare it with
-- their own clocks).
-- keep(key, ttl_ms) raises the key's TTL to at least ttl_ms (never lowers it):
-- a key that holds several entries with their own expiries lives as long as
-- its longest-lived entry.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function keep(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end
