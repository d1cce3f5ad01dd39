-- set.lua: fenced write of a value kept in Redis.
--
-- KEYS[1]  data key: a hash {v = value, t = last token accepted}
-- ARGV[1]  value
-- ARGV[2]  token (decimal integer, 1 .. 2^53-1)
-- ARGV[3]  TTL in milliseconds; 0 keeps the key's current TTL (none for a new key)
--
-- Returns {1, token}  written: ARGV[2] >= the last token accepted (or none yet)
--         {0, last}   stale: a higher token was accepted before; nothing changed
-- Errors  WRONGTYPE   the key exists and is not a hash
--         ERR         the key is a hash without a token field (not ours)
local tok = tonumber(ARGV[2])
local last = redis.call('HGET', KEYS[1], 't')
if last then
  last = tonumber(last)
  if tok < last then
    return {0, last}
  end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.error_reply('ERR fence: key holds a hash without a token')
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 't', ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {1, tok}
