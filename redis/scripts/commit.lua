-- Applies one partition's writes and their index changes if, and only if,
-- the partition's lock is the caller's (or, for a caller without one, is
-- not held at all), the partition bears a state mark the caller expects
-- (see Backend.Mark), and every record written is still at the version the
-- caller read. All checks come before any write.
--
-- KEYS[1]  the partition's lock
-- KEYS[2]  the partition's profile count
-- KEYS[3]  the partition's email set
-- KEYS[4]  the partition's state mark
-- KEYS[5 .. 4+W]          one record key per write
-- KEYS[5+W .. #KEYS]      one index key per index change
-- ARGV[1]  the lock's token, or "" for a caller that holds no lock
-- ARGV[2]  W, the number of writes
-- ARGV[3]  the marks the caller accepts, as ",a,b," ("" is no mark)
-- ARGV[4 ..]  per write: email, encoded record ("" deletes), and the
--             first 8 bytes (the version) of the record it replaces, ""
--             when it creates one;
--             then per index change: "+" or "-", and the member
--
-- Errors, each a code and a message (a reply without a space would get
-- Redis's ERR code instead): PARTMAP_LOCK_LOST (the lock is not the
-- caller's any more), PARTMAP_BUSY (another holds the lock of a caller
-- without one), PARTMAP_STALE (the partition bears a mark the caller does
-- not expect), PARTMAP_CHANGED (a record is not the one the caller read).
local lock = redis.call('GET', KEYS[1])
if ARGV[1] == '' then
  if lock then
    return redis.error_reply('PARTMAP_BUSY another writer holds the partition lock')
  end
elseif lock ~= ARGV[1] then
  return redis.error_reply('PARTMAP_LOCK_LOST the partition lock is not the caller\'s')
end
local state = redis.call('GET', KEYS[4]) or ''
if not string.find(ARGV[3], ',' .. state .. ',', 1, true) then
  return redis.error_reply('PARTMAP_STALE the partition is marked "' .. state .. '"')
end
local writes = tonumber(ARGV[2])
for w = 1, writes do
  -- GETRANGE reads only the version, and "" for a missing record.
  if redis.call('GETRANGE', KEYS[4 + w], 0, 7) ~= ARGV[4 + (w - 1) * 3 + 2] then
    return redis.error_reply('PARTMAP_CHANGED a record changed since it was read')
  end
end
local delta = 0
for w = 1, writes do
  local k, a = 4 + w, 4 + (w - 1) * 3
  local email, value, prev = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  if value == '' then
    redis.call('DEL', KEYS[k])
    redis.call('ZREM', KEYS[3], email)
    if prev ~= '' then delta = delta - 1 end
  else
    redis.call('SET', KEYS[k], value)
    redis.call('ZADD', KEYS[3], 0, email)
    if prev == '' then delta = delta + 1 end
  end
end
for k = 5 + writes, #KEYS do
  local a = 4 + writes * 3 + (k - 5 - writes) * 2
  if ARGV[a] == '+' then
    redis.call('ZADD', KEYS[k], 0, ARGV[a + 1])
  else
    redis.call('ZREM', KEYS[k], ARGV[a + 1])
  end
end
if delta ~= 0 then
  if redis.call('INCRBY', KEYS[2], delta) <= 0 then redis.call('DEL', KEYS[2]) end
end
return 1
