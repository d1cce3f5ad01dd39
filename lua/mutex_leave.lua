-- mutex_leave.lua: an Acquire call of a Mutex gives up (cancelled, Wait ran
-- out, error): it leaves the queue, and gives back a grant made to it that it
-- never saw (handed over while it was giving up, or a reply lost), so the
-- lock is not stuck until that grant's TTL (see mutex_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  token of the Acquire call (32 hex chars)
-- ARGV[2]  its queue member (op|token|lease-ms|client|holder metadata)
-- ARGV[3]  '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
--
-- The lock's wake-up channel (see queue_lib.lua) is KEYS[1] .. ':wake'.
--
-- Returns 1  a grant to this call was given back (handed to the next live
--            waiter, or deleted)
--         0  there was none; at most the queue place was removed
-- Errors  WRONGTYPE   the key exists and is not a string
q_leave(KEYS[3], KEYS[4], ARGV[2])
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 32) == ARGV[1] then
  mutex_hand_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], v, KEYS[1] .. ':wake', ARGV[3], true)
  return 1
end
return 0
