-- Trims a partition number's change feed (Backend.TrimFeed, feed.go) and
-- records the ID of the newest entry it deleted as the cut, in one step,
-- so that a reader that finds a cut at or after its cursor knows it may
-- have lost entries.
--
-- KEYS[1]  the partition number's feed, a stream
-- KEYS[2]  its cut
-- ARGV[1]  delete the entries before this time (Unix ms); 0 none
-- ARGV[2]  delete all but the newest this many; 0 none
-- ARGV[3]  delete at most this many for ARGV[2] in one run
--
-- Returns the entries left and the ID of the oldest ("" when none).
local function parse(id)
  local d = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, d - 1)), tonumber(string.sub(id, d + 1))
end
local function later(a, b) -- whether ID a is after ID b
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am > bm or (am == bm and as > bs)
end

local newest = nil -- the newest entry to delete
local before, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
if before > 0 then
  local r = redis.call('XREVRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '-', 'COUNT', 1)
  if #r > 0 then newest = r[1][1] end
end
if keep > 0 then
  local n = redis.call('XLEN', KEYS[1])
  if n > keep then
    local r = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', math.min(n - keep, tonumber(ARGV[3])))
    local id = r[#r][1]
    if newest == nil or later(id, newest) then newest = id end
  end
end
if newest ~= nil then
  local first = redis.call('XRANGE', KEYS[1], '(' .. newest, '+', 'COUNT', 1)
  if #first > 0 then
    redis.call('XTRIM', KEYS[1], 'MINID', first[1][1])
  else
    redis.call('XTRIM', KEYS[1], 'MAXLEN', 0)
  end
  redis.call('SET', KEYS[2], newest)
end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then return {redis.call('XLEN', KEYS[1]), ''} end
return {redis.call('XLEN', KEYS[1]), first[1][1]}
