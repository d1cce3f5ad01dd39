-- sem_set_permits.lua: set a Semaphore's permit count (Semaphore.SetPermits).
--
-- KEYS[1]  count key (see sem_acquire.lua)
-- ARGV[1]  the new count (>= 1)
-- ARGV[2]  its TTL in milliseconds (as sem_acquire.lua's ARGV[5])
-- ARGV[3]  wake-up channel of the semaphore
--
-- Permits held beyond a lowered count stay until they are released; waiters
-- are woken, as more permits may fit.
--
-- Returns the count the store kept before (0: none)
local old = tonumber(redis.call('GET', KEYS[1])) or 0
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], 'a')
return old
