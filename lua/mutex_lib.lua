-- mutex_lib.lua: prepended to the Mutex scripts after fence.lua and
-- queue_lib.lua (not a script of its own).
--
-- A Mutex is a string key "token|fence|holder metadata" with the lease as its
-- TTL, and a waiter queue (see queue_lib.lua). A token followed by '+'
-- ("token+|fence|metadata") marks a lock that may have waiters: a release of
-- an unmarked Mutex deletes it without looking at the queue. The mark is set
-- by every attempt that finds the Mutex held (and queues), by a hand-off, and
-- by a grant to a caller that was queued; so while a waiter is queued the
-- lock is marked, except after a lease ran out with waiters queued and a
-- caller took the free Mutex: the next attempt of any waiter (each tries
-- again at least every third of its queue timeout) marks it again. A mark
-- with nobody queued costs the release one look at the queue.

-- mutex_value is the value of a Mutex held by holder with the fence whose
-- decimal digits are t; marked: it may have waiters.
local function mutex_value(holder, t, meta, marked)
  local m = ''
  if marked then
    m = '+'
  end
  return holder .. m .. '|' .. t .. '|' .. meta
end

-- mutex_fence returns the fence stored in a Mutex value.
local function mutex_fence(v)
  return tonumber(string.match(v, '^[^|]*|(%d+)|'))
end

-- mutex_mark marks the held Mutex whose value is v (its TTL kept); a value
-- that is not a Mutex's (a foreign string) is left alone.
local function mutex_mark(lock, v)
  if string.sub(v, 33, 33) == '|' and mutex_fence(v) then
    redis.call('SET', lock, string.sub(v, 1, 32) .. '+' .. string.sub(v, 33), 'KEEPTTL')
  end
end

-- mutex_hand_on gives up the Mutex whose value is v: if it is marked (or
-- look is true), it goes to the first live waiter whose Client listens (see
-- q_hand); otherwise, or if there is none, the key is deleted.
local function mutex_hand_on(lock, fence, queue, timeouts, v, wake, check, look)
  if (look or string.sub(v, 33, 33) == '+') and q_hand(queue, timeouts, fence, mutex_fence(v), wake, check, nil,
      function(holder, op, meta, ttl, t)
        redis.call('SET', lock, mutex_value(holder, t, meta, true), 'PX', ttl)
      end) then
    return
  end
  redis.call('DEL', lock)
end
