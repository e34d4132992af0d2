-- Raises the number of change feeds that readers read to at least
-- ARGV[1], never lowering it (feed.go).
--
-- KEYS[1]  the number of feeds
-- ARGV[1]  the number wanted
--
-- Returns the number now recorded.
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if n >= want then return n end
redis.call('SET', KEYS[1], ARGV[1])
return want
