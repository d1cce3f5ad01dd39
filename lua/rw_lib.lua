-- rw_lib.lua: prepended to the RWLock scripts after lib.lua (not a script of
-- its own).
--
-- An RWLock is, in the slot of {name}:
--   lock key     hash {s = 'rw', o = writer, n = write count, t = fence,
--                m = holder metadata, x = id of the last operation applied};
--                it exists only while a writer holds, with the writer's TTL
--   readers key  zset reader owner -> expiry (server ms): every read hold
--                has its own expiry
--   holds key    hash reader owner -> "count|last op|fence|holder metadata"
--   writers key  zset waiting writer -> liveness deadline (server ms). While it is
--                not empty, new readers wait (writer preference).
--   The members of writers are "op|owner|lease-ms|client|holder metadata"
--   (as a FairLock's queue).

-- rw_purge drops read holds whose lease ran out and waiting writers whose
-- deadline passed.
local function rw_purge(readers, holds, writers, now)
  local dead = redis.call('ZRANGEBYSCORE', readers, '-inf', now, 'LIMIT', 0, 100)
  if #dead > 0 then
    redis.call('ZREM', readers, unpack(dead))
    redis.call('HDEL', holds, unpack(dead))
  end
  redis.call('ZREMRANGEBYSCORE', writers, '-inf', now)
end

-- rw_hold parses a reader's entry in the holds key.
local function rw_hold(v)
  local n, x, t, m = string.match(v, '^(%d+)|([^|]*)|(%d+)|(.*)$')
  return tonumber(n), x, t, m
end

-- rw_until returns the ms until the last read hold expires (-1: none).
local function rw_until(readers, now)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[2] then
    return tonumber(last[2]) - now
  end
  return -1
end
