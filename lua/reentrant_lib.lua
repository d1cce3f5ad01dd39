-- reentrant_lib.lua: prepended to the scripts of the reentrant locks that
-- queue (Lock, FairLock) after fence.lua, lib.lua and queue_lib.lua (not a
-- script of its own).
--
-- The lock key is a hash {s = shape mark (absent for a Lock, 'fair' for a
-- FairLock), o = owner, n = hold count, t = fence, m = holder metadata,
-- x = id of the last operation applied, h = operation id of the Acquire call
-- the lock was handed to (absent or '' if none), w = '1' if the lock may have
-- waiters}, next to a waiter queue (queue_lib.lua).
--
-- The w mark lets a release of a lock nobody waits for delete it without
-- looking at the queue or publishing. It is set by every attempt that finds
-- the lock held by another owner and queues (and by a MultiLock or RedLock
-- attempt refused by it: lock_acquire.lua, multi_acquire.lua), by a
-- hand-off, and by a grant to a caller that was queued; it goes with the
-- key. So while a waiter is queued the lock is marked, except after a lease
-- ran out with waiters queued and a Lock caller took the free lock: the next
-- attempt of any waiter (each tries again at least every third of its queue
-- timeout) marks it again. A mark with nobody waiting costs the release one
-- look at the queue and one PUBLISH.

-- reentrant_fields returns the lock's fields as a table from its HGETALL
-- reply h, and whether the key is a hash of another shape (fields, but no
-- owner).
local function reentrant_fields(h)
  local f = {}
  for i = 1, #h, 2 do
    f[h[i]] = h[i + 1]
  end
  return f, #h > 0 and not f.o
end

-- reentrant_grant makes owner the holder of the lock for ttl ms with the
-- fence whose decimal digits are t: handed, op is a waiting call the lock is handed to (over the hash of
-- the holder it takes over from); else the key was free, and marked asks for
-- the waiters mark.
local function reentrant_grant(lock, t, mark, owner, op, meta, ttl, handed, marked)
  local f = {'o', owner, 'n', 1, 't', t, 'm', meta, 'x', op}
  if handed then
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'h', op, 'w', '1'
  elseif marked then
    f[#f + 1], f[#f + 2] = 'w', '1'
  end
  if mark and mark ~= '' then
    f[#f + 1], f[#f + 2] = 's', mark
  end
  redis.call('HSET', lock, unpack(f))
  redis.call('PEXPIRE', lock, ttl)
end

-- reentrant_hand returns the q_hand call that hands the lock (its last fence
-- and shape mark given) to the first live waiter whose Client listens, or to
-- self_op (see q_hand).
local function reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check, self_op)
  return q_hand(queue, timeouts, fence, fence_ttl, tonumber(last), wake, check, self_op,
    function(holder, op, meta, ttl, t)
      reentrant_grant(lock, t, mark, holder, op, meta, ttl, true, true)
    end)
end

-- reentrant_hand_on gives up the lock: it goes to the first live waiter whose
-- Client listens, or the key is deleted and a release published on the wake
-- channel itself (for waiters that do not queue: a MultiLock on the same
-- name). An unmarked lock (waiters nil) is deleted, nothing more.
local function reentrant_hand_on(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check, waiters)
  if not waiters then
    redis.call('DEL', lock)
    return
  end
  if not reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check, nil) then
    redis.call('DEL', lock)
    redis.call('PUBLISH', wake, '1')
  end
end
