-- Reads one page of a partition number's change feed, with the server's
-- time and the feed's cut in the same step (Backend.Feed, feed.go).
--
-- KEYS[1]  the partition number's feed, a stream
-- KEYS[2]  its cut: the ID of the newest entry a trim deleted
-- ARGV[1]  the first ID to read (inclusive, XRANGE syntax)
-- ARGV[2]  how many entries to read at most
--
-- Returns the time (seconds, microseconds), the cut ("" when never
-- trimmed) and the entries. Any entry appended later gets an ID at or
-- after the time returned.
local t = redis.call('TIME')
local cut = redis.call('GET', KEYS[2]) or ''
return {t[1], t[2], cut, redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])}
