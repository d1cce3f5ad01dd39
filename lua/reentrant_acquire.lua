-- reentrant_acquire.lua: grant, re-enter, claim, or queue for a Lock or a
-- FairLock (see reentrant_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars; carried by the caller's context)
-- ARGV[2]  operation id, unique to one Acquire call (16 hex chars)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  holder metadata (host|pid|acquired-at-ms|label)
-- ARGV[5]  the caller's clock in microseconds (decimal digits; see fence.lua)
-- ARGV[6]  queue timeout in milliseconds; 0: try once without queueing; < 0:
--          wait without a place in the queue (a MultiLock's member, a
--          RedLock's node): a refusal only marks the lock waited for
-- ARGV[7]  id of the caller's Client (16 hex chars)
-- ARGV[8]  '1' if an earlier attempt of this call queued it, else '0'
-- ARGV[9]  wake-up channel of the lock (hand-offs go to ARGV[9] .. ':' .. client)
-- ARGV[10] shape mark written to a new grant ('' for a Lock, 'fair')
-- ARGV[11] '1' for strict arrival order (FairLock): a free lock goes to the
--          first live waiter, and the caller queues behind it; '0' (Lock):
--          a free lock goes to the caller
-- ARGV[12] '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
--
-- Returns fence > 0         granted (count 1), re-entered by the owner
--                            (count + 1, same fence), or claimed: the lock was
--                            handed to this call (or a retry of this call
--                            finds it already applied); the TTL is raised to
--                            at least the lease
--         -(pttl + 2)        not this call's turn (see refused); with
--                            ARGV[6] > 0 it is queued (or keeps its place,
--                            with a new deadline of now + ARGV[6]); pttl is
--                            the holder's remaining TTL in ms (-1: none)
-- Errors  WRONGTYPE          the key is not a hash of a lock
--
-- The libraries are defined at the "--@libraries" line, after the path of
-- a free lock nobody queues for: such a grant costs no function definitions
-- but fence.lua's.
local h = redis.call('HGETALL', KEYS[1])
local qt = tonumber(ARGV[6])
if #h == 0 and ARGV[8] ~= '1' and (ARGV[11] ~= '1' or redis.call('ZCARD', KEYS[3]) == 0) then
  local t, digits = next_fence(KEYS[2], ARGV[5])
  reentrant_grant(KEYS[1], digits, ARGV[10], ARGV[1], ARGV[2], ARGV[4], ARGV[3], false, false)
  return t
end
local f, foreign = reentrant_fields(h)
if foreign then
  return redis.error_reply('WRONGTYPE lock key holds a hash of another shape')
end
if f.o == ARGV[1] then
  reentrant_reenter(KEYS[1], f, ARGV[2], ARGV[3])
  if ARGV[8] ~= '1' then
    return tonumber(f.t)
  end
end
if f.o and f.o ~= ARGV[1] and qt <= 0 then
  if qt < 0 then
    reentrant_wait(KEYS[1], f)
  end
  return refused(redis.call('PTTL', KEYS[1]))
end
--@libraries
if f.o == ARGV[1] then -- a queued call re-entered: it leaves its place
  q_leave(KEYS[3], KEYS[4], q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[7], ARGV[4]))
  return tonumber(f.t)
end
local handed = false
if not f.o then
  if ARGV[11] == '1' then
    handed = reentrant_hand(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil, ARGV[10], ARGV[9], ARGV[12], ARGV[2])
  end
  if handed ~= true then
    local t, digits = next_fence(KEYS[2], ARGV[5])
    reentrant_grant(KEYS[1], digits, ARGV[10], ARGV[1], ARGV[2], ARGV[4], ARGV[3], false, ARGV[8] == '1')
    if ARGV[8] == '1' and not handed then
      q_leave(KEYS[3], KEYS[4], q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[7], ARGV[4]))
    end
    return t
  end
end
if qt > 0 then
  q_join(KEYS[3], KEYS[4], q_member(ARGV[2], ARGV[1], ARGV[3], ARGV[7], ARGV[4]), clock(), qt)
  if f.o then
    reentrant_wait(KEYS[1], f)
  end
end
return refused(redis.call('PTTL', KEYS[1]))
