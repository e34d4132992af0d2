-- Reads a transaction's status for a resolver whose committer still holds
-- the lock. The record is written again, unchanged, as abort.lua does, so
-- that the WAIT after it proves the status replicated before the resolver
-- acts on it in another partition.
--
-- KEYS[1]  the transaction's record, in its primary partition's slot
--
-- Returns the status: "prepared", "committed", "aborted", or "" when the
-- record is not there.
local s = redis.call('GET', KEYS[1])
if s then
  redis.call('SET', KEYS[1], s)
end
return s or ''
