-- reentrant_hash.lua: the hash of a Lock-shaped key and the functions that
-- write it, for every script that holds one (Lock, FairLock, the members of
-- a MultiLock, a RedLock's nodes); prepended after fence.lua and lib.lua,
-- ahead of a script's fast path (not a script of its own).
--
-- The lock key is a hash {s = shape mark (absent for a Lock, 'fair' for a
-- FairLock, 'rw' for an RWLock writer), o = owner, n = hold count, t = fence,
-- m = holder metadata, x = id of the last operation applied, h = operation
-- id of the Acquire call the lock was handed to (absent or '' if none), w =
-- '1' if the lock may have waiters}.
--
-- The w mark lets a release of a lock nobody waits for delete it without
-- looking at the queue or publishing. It is set by every attempt that finds
-- the lock held by another owner and waits (queued, or a MultiLock or
-- RedLock attempt: reentrant_wait), by a hand-off, and by a grant to a
-- caller that was queued; it goes with the key. So while a waiter is queued
-- the lock is marked, except after a lease ran out with waiters queued and
-- a Lock caller took the free lock: the next attempt of any waiter (each
-- tries again at least every third of its queue timeout) marks it again. A
-- mark with nobody waiting costs the release one look at the queue and one
-- PUBLISH.

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

-- The writers of the hash, for every script that holds a Lock-shaped key
-- (Lock, FairLock, the members of a MultiLock, a RedLock's nodes):
-- reentrant_grant writes a new holder, reentrant_reenter counts a re-entry,
-- reentrant_unhold counts a release, reentrant_wait marks it waited for
-- (reentrant_hand_on, in reentrant_lib.lua, frees it).

-- reentrant_grant makes owner the holder of the lock for ttl ms with the
-- fence whose decimal digits are t: handed, op is a waiting call the lock is
-- handed to (over the hash of the holder it takes over from); else the key
-- was free, and marked asks for the waiters mark.
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

-- reentrant_reenter counts operation op's re-entry of the lock whose
-- fields are f (its owner's), at most once per op (a retry, or a hand-off
-- to op, counts nothing), raises its TTL to at least ttl ms, and returns the
-- hold count.
local function reentrant_reenter(lock, f, op, ttl)
  local n = tonumber(f.n) or 1
  if f.h ~= op and f.x ~= op then
    n = redis.call('HINCRBY', lock, 'n', 1)
    redis.call('HSET', lock, 'x', op)
  end
  keep(lock, ttl)
  return n
end

-- reentrant_unhold counts operation op's release of owner's hold: 0 not
-- ours, 2 still held (the count went down, or op was already applied), or 1
-- when the count reached 0 (the caller frees the lock), with the fields
-- {t, s, w} the caller frees it with.
local function reentrant_unhold(lock, owner, op)
  local f = redis.call('HMGET', lock, 'o', 'n', 't', 'x', 's', 'w')
  if f[1] ~= owner then
    return 0
  end
  if f[4] == op then
    return 2
  end
  if (tonumber(f[2]) or 1) > 1 then
    redis.call('HINCRBY', lock, 'n', -1)
    redis.call('HSET', lock, 'x', op)
    return 2
  end
  return 1, {t = f[3], s = f[5], w = f[6]}
end

-- reentrant_wait marks the lock whose fields are f, held by another owner,
-- as waited for (unless it is an RWLock writer's hash: its own release
-- publishes), so that its release wakes the waiters that do not queue.
local function reentrant_wait(lock, f)
  if f.s ~= 'rw' and not f.w then
    redis.call('HSET', lock, 'w', '1')
  end
end
