-- reentrant_lib.lua: prepended to the scripts of the reentrant locks that
-- queue (Lock, FairLock) after fence.lua, lib.lua and queue_lib.lua (not a
-- script of its own).
--
-- The lock key is a hash {s = shape mark (absent for a Lock, 'fair' for a
-- FairLock), o = owner, n = hold count, t = fence, m = holder metadata,
-- x = id of the last operation applied, h = operation id of the Acquire call
-- the lock was handed to ('' if none)}, next to a waiter queue (queue_lib.lua).

-- reentrant_grant makes owner the holder of the free lock for ttl ms with
-- fence t; handed: op is a waiting call the lock is handed to.
local function reentrant_grant(lock, t, mark, owner, op, meta, ttl, handed)
  local ts = string.format('%.0f', t)
  local h = ''
  if handed then
    h = op
  end
  if mark and mark ~= '' then
    redis.call('HSET', lock, 's', mark, 'o', owner, 'n', 1, 't', ts, 'm', meta, 'x', op, 'h', h)
  else
    redis.call('HSET', lock, 'o', owner, 'n', 1, 't', ts, 'm', meta, 'x', op, 'h', h)
  end
  redis.call('PEXPIRE', lock, ttl)
end

-- reentrant_hand returns the q_hand call that hands the lock (its last fence
-- and shape mark given) to the first live waiter whose Client listens, or to
-- self_op (see q_hand).
local function reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check, self_op)
  return q_hand(queue, timeouts, fence, fence_ttl, tonumber(last), wake, check, self_op,
    function(holder, op, meta, ttl, t)
      reentrant_grant(lock, t, mark, holder, op, meta, ttl, true)
    end)
end

-- reentrant_hand_on gives up the lock: it goes to the first live waiter whose
-- Client listens, or the key is deleted and a release published on the wake
-- channel itself (for waiters that do not queue: a MultiLock or RedLock on
-- the same name).
local function reentrant_hand_on(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check)
  if not reentrant_hand(lock, fence, queue, timeouts, last, mark, wake, fence_ttl, check, nil) then
    redis.call('DEL', lock)
    redis.call('PUBLISH', wake, '1')
  end
end
