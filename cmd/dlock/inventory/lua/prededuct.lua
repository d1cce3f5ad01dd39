-- prededuct.lua: pre-deduct stock in Redis and queue the order (000 §3.3 C), idempotent per request id.
--
-- KEYS[1]  stock key: the units left, an integer string; missing = not warmed up
-- KEYS[2]  request hash: request id -> "left|qty|buyer" (sold), "-1|qty|buyer" (sold out),
--          "-3|qty|buyer" (sold, then compensated by the consumer)
-- KEYS[3]  order stream (fields sku, qty, buyer, rid)
-- ARGV[1]  qty (>= 1)
-- ARGV[2]  request id
-- ARGV[3]  buyer
-- ARGV[4]  sku
-- ARGV[5]  request hash TTL in milliseconds
--
-- Returns {1, left}    deducted; the order is queued in the stream
--         {-1, stock}  sold out; recorded for the request id; nothing deducted
--         {-2, 0}      the stock key is missing (not warmed up): a system error; nothing recorded
--         {2, prior}   the request id was seen before; prior is its recorded string
-- Errors  ERR          the stock key does not hold an integer
local prior = redis.call('HGET', KEYS[2], ARGV[2])
if prior then
  return {2, prior}
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-2, 0}
end
stock = tonumber(stock)
if not stock then
  return redis.error_reply('ERR stock key does not hold an integer')
end
local n = tonumber(ARGV[1])
local tail = '|' .. ARGV[1] .. '|' .. ARGV[3]
if stock < n then
  redis.call('HSET', KEYS[2], ARGV[2], '-1' .. tail)
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
  return {-1, stock}
end
local left = redis.call('DECRBY', KEYS[1], n)
redis.call('XADD', KEYS[3], '*', 'sku', ARGV[4], 'qty', ARGV[1], 'buyer', ARGV[3], 'rid', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], string.format('%d', left) .. tail)
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {1, left}
