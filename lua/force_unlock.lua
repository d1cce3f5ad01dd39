-- force_unlock.lua: an operator's forced unlock: delete a lock's keys and wake every waiter.
--
-- KEYS     the lock key and its suffixed keys (queue, timeouts, ...), all in
--          the lock's hash slot (never the slot's fence counter, another key,
--          so fencing tokens stay monotonic)
-- ARGV[1]  wake-up channel
--
-- Returns  an array with, for each KEYS[i], 1 if it existed and was deleted,
--          else 0. When any key was deleted, 'a' (wake all) is published on
--          ARGV[1], and on ARGV[1] .. ':' .. client for every Client with a
--          waiter in the waiter queue (a key ending in ':queue', see
--          queue_lib.lua), so every waiter of every process tries again.
local out = {}
local any = false
local clients = {}
for i, k in ipairs(KEYS) do
  if string.sub(k, -6) == ':queue' and redis.call('TYPE', k).ok == 'zset' then
    for _, m in ipairs(redis.call('ZRANGE', k, 0, -1)) do
      local client = string.match(m, '^[^|]*|[^|]*|[^|]*|([^|]*)|')
      if client then
        clients[client] = true
      end
    end
  end
  out[i] = redis.call('DEL', k)
  if out[i] == 1 then
    any = true
  end
end
if any then
  redis.call('PUBLISH', ARGV[1], 'a')
  for client in pairs(clients) do
    redis.call('PUBLISH', ARGV[1] .. ':' .. client, 'a')
  end
end
return out
