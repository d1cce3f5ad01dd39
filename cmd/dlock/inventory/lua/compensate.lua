-- compensate.lua: give back the units of a queued order that cannot be persisted, exactly once.
--
-- KEYS[1]  order stream
-- KEYS[2]  stock key
-- KEYS[3]  dead-letter stream
-- KEYS[4]  request hash (see prededuct.lua)
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  qty
-- ARGV[4]  request id
-- ARGV[5]  buyer
-- ARGV[6]  reason
--
-- Returns 1  compensated: units returned (if the stock key exists), the entry copied to the
--            dead-letter stream, acknowledged and deleted, the request marked "-3|qty|buyer"
--         0  the entry is no longer in the stream (already handled): nothing changed
if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('INCRBY', KEYS[2], ARGV[3])
end
redis.call('XADD', KEYS[3], '*', 'id', ARGV[2], 'rid', ARGV[4], 'qty', ARGV[3], 'buyer', ARGV[5], 'reason', ARGV[6])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[4], '-3|' .. ARGV[3] .. '|' .. ARGV[5])
return 1
