-- The backstop's look at one partition number (hints.go): what a lost
-- hint would hide there. It reads only.
--
-- KEYS[1]  the partition number's change feed, a stream
-- then, per layout that has the partition, three keys:
--   its expiry entries (a sorted set), its pending intent, its lock
-- ARGV[1]  the least expiry entry ("[" and the value's length)
--
-- Returns the stream's length, its first entry's ID ("" when empty),
-- then per layout: the soonest expiry entry, the intent and the lock, each
-- "" when there is none.
local out = {redis.call('XLEN', KEYS[1])}
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first > 0 then out[2] = first[1][1] else out[2] = '' end
for i = 2, #KEYS, 3 do
  local soonest = redis.call('ZRANGEBYLEX', KEYS[i], ARGV[1], '+', 'LIMIT', 0, 1)
  out[#out + 1] = soonest[1] or ''
  local v = redis.call('MGET', KEYS[i + 1], KEYS[i + 2])
  out[#out + 1] = v[1] or ''
  out[#out + 1] = v[2] or ''
end
return out
