-- reentrant_acquire.lua: grant, re-enter, claim, or queue for a Lock or a
-- FairLock (see reentrant_lib.lua).
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
-- ARGV[9]  '1' if an earlier attempt of this call queued it, else '0'
-- ARGV[10] shape mark written to a new grant ('' for a Lock, 'fair')
-- ARGV[11] '1' for strict arrival order (FairLock): a free lock goes to the
--          first live waiter, and the caller queues behind it; '0' (Lock):
--          a free lock goes to the caller
-- ARGV[12] '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
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
local member = q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[8], ARGV[4])
local f = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'x', 'h')
if f[1] == ARGV[1] then
  local n = tonumber(f[2])
  if f[5] ~= ARGV[2] and f[4] ~= ARGV[2] then
    n = redis.call('HINCRBY', KEYS[1], 'n', 1)
    redis.call('HSET', KEYS[1], 'x', ARGV[2])
  end
  keep(KEYS[1], ARGV[3])
  if ARGV[9] == '1' then
    q_leave(KEYS[3], KEYS[4], member)
  end
  return {1, tonumber(f[3]), n}
end
if not f[1] then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
  end
  local handed, now_us = false, nil
  if ARGV[11] == '1' then
    handed, now_us = reentrant_hand(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil, ARGV[10], ARGV[7], ARGV[5], ARGV[12], ARGV[2])
  end
  if handed ~= true then
    if not now_us then
      local now_ms
      now_ms, now_us = clock()
    end
    local t = fence_at(KEYS[2], ARGV[5], now_us, nil)
    reentrant_grant(KEYS[1], t, ARGV[10], ARGV[1], ARGV[2], ARGV[4], ARGV[3], false)
    if ARGV[9] == '1' and not handed then
      q_leave(KEYS[3], KEYS[4], member)
    end
    return {1, t, 1}
  end
end
local qt = tonumber(ARGV[6])
if qt > 0 then
  q_join(KEYS[3], KEYS[4], member, clock(), qt)
end
return {0, redis.call('PTTL', KEYS[1])}
