-- mutex_release.lua: release a Mutex only if it is still ours, handing it to
-- the first live waiter (see mutex_lib.lua).
--
-- KEYS[1]  lock key
-- KEYS[2]  fence counter (of the lock's hash slot: see fence.lua)
-- KEYS[3]  queue key
-- KEYS[4]  timeouts key
-- ARGV[1]  token of the holder (32 hex chars; it makes a release idempotent)
-- ARGV[2]  '1' if a hand-off must reach a subscriber of the waiter's Client
--          channel (not on a Cluster: see q_hand)
--
-- The lock's wake-up channel (see queue_lib.lua) is KEYS[1] .. ':wake'.
--
-- Returns 1  released: handed to the first live waiter (who alone is
--            notified), or deleted if nobody waits (or listens)
--         0  not ours: the key is gone or holds another token; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a string
--
-- The libraries are defined at the "--@libraries" line: releasing a Mutex
-- nobody waits for (no waiters mark) costs no function definitions.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 32) ~= ARGV[1] then
  return 0
end
if string.sub(v, 33, 33) ~= '+' then
  redis.call('DEL', KEYS[1])
  return 1
end
--@libraries
mutex_hand_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], v, KEYS[1] .. ':wake', ARGV[2])
return 1
