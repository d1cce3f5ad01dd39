-- multi_release.lua: release one hold of every member of a MultiLock whose
-- keys share one slot, as reentrant_release.lua releases one Lock.
--
-- KEYS[4i-3..4i]  lock, fence counter, queue and timeouts keys of member i
-- ARGV[1]         owner (32 hex chars)
-- ARGV[2]         operation id, unique to one Unlock call
-- ARGV[3]         '1' if a hand-off must reach a subscriber of the waiter's
--                 Client channel (not on a Cluster: see q_hand)
-- ARGV[3+i]       wake-up channel of member i
--
-- Returns 1  released: every member's count reached 0; each went to its
--            first live waiter, or was deleted (its MultiLock waiters woken)
--         2  still held by this owner on some member (re-entered)
--         0  not ours on some member (lost); the others were released
-- Errors  WRONGTYPE   a member key exists and is not a hash
local lost, held = false, false
for i = 1, #KEYS / 4 do
  local k = KEYS[4 * i - 3]
  local r, f = reentrant_unhold(k, ARGV[1], ARGV[2])
  if r == 0 then
    lost = true
  elseif r == 2 then
    held = true
  else
    reentrant_hand_on(k, KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], f.t, f.s, ARGV[3 + i], ARGV[3], f.w)
  end
end
if lost then
  return 0
end
if held then
  return 2
end
return 1
