-- fair_acquire.lua: grant, re-enter, claim, or queue for a FairLock (see fair_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars; carried by the caller's context)
-- ARGV[2]  operation id, unique to one Acquire call (16 hex chars)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  fence counter TTL in milliseconds
-- ARGV[6]  queue timeout in milliseconds; 0: try once without queueing
-- ARGV[7]  wake-up channel of the lock (hand-offs go to ARGV[7] .. ':' .. client)
-- ARGV[8]  id of the caller's Client (16 hex chars)
--
-- The lock goes to waiters in arrival order. When it is free, the first live
-- waiter gets it: this call if it is first (or nobody waits); otherwise it is
-- handed to the first one (see fair_handoff), and this call queues.
--
-- Returns {1, fence, count}  granted (count 1), re-entered by the owner
--                            (count + 1, same fence), or claimed: the lock was
--                            handed to this call (or a retry of this call
--                            finds it already applied); the TTL is raised to
--                            at least the lease
--         {0, pttl}          not this call's turn; unless ARGV[6] is 0 it is
--                            queued (or keeps its place, with a new deadline
--                            of now + ARGV[6]); pttl is the holder's remaining
--                            TTL in ms (-1: none)
-- Errors  WRONGTYPE          the key is not a hash of a lock
local now = server_ms()
local member = ARGV[2] .. '|' .. ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[8] .. '|' .. ARGV[4]
fair_evict(KEYS[3], KEYS[4], now)
local o = redis.call('HGET', KEYS[1], 'o')
if not o and redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
end
if o == ARGV[1] then
  local n
  if redis.call('HGET', KEYS[1], 'h') == ARGV[2] or redis.call('HGET', KEYS[1], 'x') == ARGV[2] then
    n = tonumber(redis.call('HGET', KEYS[1], 'n'))
  else
    n = redis.call('HINCRBY', KEYS[1], 'n', 1)
    redis.call('HSET', KEYS[1], 'x', ARGV[2])
  end
  keep(KEYS[1], ARGV[3])
  redis.call('ZREM', KEYS[3], member)
  redis.call('ZREM', KEYS[4], member)
  return {1, tonumber(redis.call('HGET', KEYS[1], 't')), n}
end
if not o then
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not head or head == member then
    redis.call('ZREM', KEYS[3], member)
    redis.call('ZREM', KEYS[4], member)
    return {1, fair_grant(KEYS[1], KEYS[2], ARGV[5], ARGV[1], ARGV[2], ARGV[4], ARGV[3], false), 1}
  end
  fair_handoff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[7], now, ARGV[5])
end
local qt = tonumber(ARGV[6])
if qt > 0 then
  if not redis.call('ZSCORE', KEYS[3], member) then
    local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
    local seq = 1
    if last[2] then
      seq = tonumber(last[2]) + 1
    end
    redis.call('ZADD', KEYS[3], seq, member)
  end
  redis.call('ZADD', KEYS[4], now + qt, member)
  keep(KEYS[3], qt)
  keep(KEYS[4], qt)
end
return {0, redis.call('PTTL', KEYS[1])}
