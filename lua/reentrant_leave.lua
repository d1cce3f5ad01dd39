-- reentrant_leave.lua: an Acquire call of a Lock or FairLock gives up
-- (cancelled, Wait ran out, error): it leaves the queue, and gives back a
-- grant made to it that it never saw (handed over while it was giving up, or
-- a reply lost), so the lock is not stuck until that grant's TTL (see
-- reentrant_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id of the Acquire call
-- ARGV[3]  its queue member (op|owner|lease-ms|client|holder metadata)
-- ARGV[4]  wake-up channel of the lock (see queue_lib.lua)
-- ARGV[5]  shape mark ('' for a Lock, 'fair')
-- ARGV[6]  '1' for strict arrival order (FairLock): a free lock with waiters
--          queued (its holder's lease ran out) goes to the first live one
-- ARGV[7]  '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
--
-- Returns 1  a grant to this call was given back (the lock went to the next
--            live waiter, or is free)
--         0  there was none; at most the queue place was removed
-- Errors  WRONGTYPE   the key exists and is not a hash
q_leave(KEYS[3], KEYS[4], ARGV[3])
local f = redis.call('HMGET', KEYS[1], 'o', 'n', 't', 'x', 's', 'h')
if f[1] == ARGV[1] and (f[6] == ARGV[2] or f[4] == ARGV[2]) then
  if (tonumber(f[2]) or 1) > 1 then
    redis.call('HINCRBY', KEYS[1], 'n', -1)
    redis.call('HSET', KEYS[1], 'x', 'left:' .. ARGV[2], 'h', '')
    return 1
  end
  reentrant_hand_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], f[3], f[5], ARGV[4], ARGV[7], true)
  return 1
end
if not f[1] and ARGV[6] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then
  reentrant_hand_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil, ARGV[5], ARGV[4], ARGV[7], true)
end
return 0
