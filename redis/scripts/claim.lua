-- Claims the hints that are due in one of the hint sets (hints.go): every
-- member whose score is at or before ARGV[1], whether a plain hint or a
-- claim whose lease has run out (its claimer died), becomes a claim of
-- the caller's, its base then '|' and the caller's token, scored with the
-- end of the caller's lease. A writer's hint written later is a plain
-- member again, apart from the claim: the claimer's release never deletes
-- it, so no hint is lost to a race between a writer and a claimer.
--
-- KEYS[1]  the hint set, a sorted set
-- ARGV[1]  claim the members scored at or before this
-- ARGV[2]  the caller's lease ends then (the claims' score)
-- ARGV[3]  the caller's token
-- ARGV[4]  claim at most this many members
--
-- Returns the bases claimed, each once.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
local out, seen = {}, {}
for _, m in ipairs(due) do
  local base = m
  local bar = string.find(m, '|', 1, true)
  if bar then base = string.sub(m, 1, bar - 1) end
  redis.call('ZREM', KEYS[1], m)
  if not seen[base] then
    seen[base] = true
    out[#out + 1] = base
    redis.call('ZADD', KEYS[1], ARGV[2], base .. '|' .. ARGV[3])
  end
end
return out
