-- reentrant_release.lua: release one hold of a Lock or FairLock; at count 0
-- hand it to the first live waiter (see reentrant_hash.lua and reentrant_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  owner (32 hex chars)
-- ARGV[2]  operation id, unique to one Unlock call
-- ARGV[3]  wake-up channel of the lock (see queue_lib.lua)
-- ARGV[4]  '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
--
-- Returns 1  released: the count reached 0; the lock was handed to the first
--            live waiter (who alone is notified), or deleted if nobody waits
--            (an unmarked lock is deleted without a look at the queue: see
--            the w mark in reentrant_lib.lua)
--         2  still held by this owner: the count was decremented (or this
--            operation was already applied: a retry changes nothing)
--         0  not ours: the key is gone or has another owner; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a hash
--
-- The libraries are defined at the "--@libraries" line: releasing a lock
-- nobody waits for (no waiters mark) costs no function definitions.
local r, f = reentrant_unhold(KEYS[1], ARGV[1], ARGV[2])
if r ~= 1 then
  return r
end
if not f.w then
  redis.call('DEL', KEYS[1]) -- unmarked: nobody waits (reentrant_hash.lua)
  return 1
end
--@libraries
reentrant_hand_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], f.t, f.s, ARGV[3], ARGV[4], f.w)
return 1
