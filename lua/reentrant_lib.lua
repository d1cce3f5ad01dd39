-- reentrant_lib.lua: how a Lock or FairLock (and any Lock-shaped key)
-- changes hands through its waiter queue (queue_lib.lua); prepended after
-- fence.lua, lib.lua, reentrant_hash.lua and queue_lib.lua (not a script of
-- its own).

-- reentrant_hand returns the q_hand call that hands the lock (its last fence
-- and shape mark given) to the first live waiter whose Client listens, or to
-- self_op (see q_hand).
local function reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, check, self_op)
  return q_hand(queue, timeouts, fence, tonumber(last), wake, check, self_op,
    function(holder, op, meta, ttl, t)
      reentrant_grant(lock, t, mark, holder, op, meta, ttl, true, true)
    end)
end

-- reentrant_hand_on gives up the lock: it goes to the first live waiter whose
-- Client listens, or the key is deleted and a release published on the wake
-- channel itself (for waiters that do not queue: a MultiLock on the same
-- name). An unmarked lock (waiters nil) is deleted, nothing more.
local function reentrant_hand_on(lock, fence, queue, timeouts, last, mark, wake, check, waiters)
  if not waiters then
    redis.call('DEL', lock)
    return
  end
  if not reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, check, nil) then
    redis.call('DEL', lock)
    redis.call('PUBLISH', wake, '1')
  end
end
