-- warmup.lua: set a sku's pre-deduct stock from the database, once, unless the order stream moved on.
--
-- The caller read the order stream (every entry up to ARGV[2]), then the database, and computed
-- ARGV[1] = the database's stock minus the units of the entries it read whose order row the database
-- does not have yet. The value is right unless an order was queued after that read, which only a
-- stock key set by someone else allows: then nothing is changed.
--
-- KEYS[1]  stock key
-- KEYS[2]  order stream
-- ARGV[1]  stock to set (an integer >= 0)
-- ARGV[2]  the id of the last stream entry the caller read, or "0-0" when it read none
--
-- Returns 1   the stock key was set to ARGV[1]
--         0   the stock key exists (someone warmed it up): nothing changed
--         -1  the stream holds an entry newer than ARGV[2]: nothing changed, read again
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local newer = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+', 'COUNT', 1)
if ARGV[2] == '0-0' then
  newer = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
end
if #newer > 0 then
  return -1
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
