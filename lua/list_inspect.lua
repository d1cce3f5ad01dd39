-- list_inspect.lua: Inspect of many locks in one call, for List (not on a
-- Cluster: the keys are of many slots). The client defines, before this
-- file, inspect_1 ... inspect_N: each shape's inspect script (rw, semaphore,
-- reentrant, mutex: Inspect's order) as a local function of its keys, and
-- the table inspectors of them in that order.
--
-- KEYS        every lock's keys, lock after lock: inspect_1's, then
--             inspect_2's, ... inspect_N's
-- ARGV[s]     how many keys inspect_s takes (s = 1 .. N)
--
-- Returns one reply per lock, in order: the normalized reply of the first
-- shape that recognises its keys (inspect_lib.lua), or false for none.
local counts, per = {}, 0
for s = 1, #ARGV do
  counts[s] = tonumber(ARGV[s])
  per = per + counts[s]
end
local out = {}
for at = 0, #KEYS - per, per do
  local r, o = false, at
  for s = 1, #inspectors do
    if not r then
      local keys = {}
      for j = 1, counts[s] do
        keys[j] = KEYS[o + j]
      end
      r = inspectors[s](keys)
    end
    o = o + counts[s]
  end
  out[#out + 1] = r
end
return out
