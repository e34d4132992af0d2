-- Releases claims that claim.lua made: each claim goes, and its base comes
-- back as a plain hint with the score given, unless a hint of that base is
-- there already with an earlier one (a writer's, written since the claim).
--
-- KEYS[1]  the hint set, a sorted set
-- ARGV[1]  the caller's token
-- ARGV[2 ..]  per claim: its base, and the score it comes back with, or
--             "" for none (it goes)
--
-- Returns 1.
for i = 2, #ARGV, 2 do
  redis.call('ZREM', KEYS[1], ARGV[i] .. '|' .. ARGV[1])
  if ARGV[i + 1] ~= '' then redis.call('ZADD', KEYS[1], 'LT', ARGV[i + 1], ARGV[i]) end
end
return 1
