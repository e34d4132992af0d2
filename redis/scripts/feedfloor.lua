-- Raises a partition number's change feed's last ID to at least ARGV[1],
-- never lowering it, so that every entry appended later sorts after it
-- (Backend.Mark at a resize's switch, feed.go).
--
-- KEYS[1]  the partition number's feed, a stream
-- ARGV[1]  the floor, an ID "ms-0" with ms > 0
--
-- Returns the stream's last ID now.
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- A stream that exists and is empty, its last ID the floor.
  redis.call('XADD', KEYS[1], ARGV[1], 'e', '')
  redis.call('XDEL', KEYS[1], ARGV[1])
  return ARGV[1]
end
local info = redis.call('XINFO', 'STREAM', KEYS[1])
local last = nil
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then last = info[i + 1] end
end
local function parse(id)
  local d = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, d - 1)), tonumber(string.sub(id, d + 1))
end
local lm, ls = parse(last)
local fm, fs = parse(ARGV[1])
if lm > fm or (lm == fm and ls >= fs) then return last end
redis.call('XSETID', KEYS[1], ARGV[1])
return ARGV[1]
