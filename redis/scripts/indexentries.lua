-- Reads a partition's index entries for check: the sorted sets of every
-- field an index can have, most of which do not exist. Asking for each
-- set from the client cost a command a field, about 230 a partition;
-- here only the sets that exist come back.
--
-- KEYS  the sorted sets, one per field number that can have entries
--
-- Returns a flat list: for each set that exists, its position in KEYS
-- (from 1) and its members, in order.
local out = {}
for i, k in ipairs(KEYS) do
  local members = redis.call('ZRANGE', k, 0, -1)
  if #members > 0 then
    out[#out + 1] = i
    out[#out + 1] = members
  end
end
return out
