-- Deletes a partition's pending intent if it is transaction ARGV[1]'s:
-- the transaction was aborted, or, on its primary partition, is over, and
-- then its record goes too, in the same step.
--
-- KEYS[1]  the partition's pending intent
-- KEYS[2]  the transaction's record (on the primary), or the intent again
-- ARGV[1]  the transaction's id (32 characters)
--
-- Returns 1 if the intent was deleted, 0 if it was not the transaction's.
local p = redis.call('GET', KEYS[1])
if not p or string.sub(p, 1, 32) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
