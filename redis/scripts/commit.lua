-- Applies one partition's writes and their index changes, or takes one
-- step of a transaction over several partitions (DESIGN.md, "Transactions
-- across partitions (Redis)"). All checks come before any write.
--
-- Modes (ARGV[1]):
--   commit   apply the writes if, and only if, the partition's lock is the
--            caller's (or, for a caller without one, is not held at all),
--            the partition bears a state mark the caller expects (see
--            Backend.Mark), no transaction is pending on it, and every
--            record written is still at the version the caller read.
--   prepare  the same checks with the caller's lock, but instead of
--            applying the writes, store ARGV[6] as the partition's pending
--            intent.
--   primary  prepare, and also create the transaction's record, KEYS[6],
--            with the status "prepared": the primary partition's step.
--   decide   the commit point, on the primary: if the lock is the
--            caller's and the record is still "prepared", set it to
--            "committed" and apply the primary's writes. The pending
--            intent stays, as the record's marker, until the end.
--   roll     roll the partition forward: if its pending intent is
--            transaction ARGV[5]'s, apply the writes and delete the
--            intent; otherwise (done already) do nothing.
--
-- KEYS[1]  the partition's lock
-- KEYS[2]  the partition's profile count
-- KEYS[3]  the partition's email set
-- KEYS[4]  the partition's state mark
-- KEYS[5]  the partition's pending intent
-- KEYS[6]  the transaction's record (primary, decide); the partition's
--          fence key (roll); any key of the slot otherwise
-- KEYS[7]  the partition number's change feed, a stream
-- KEYS[8 .. 7+W]          one record key per write
-- KEYS[8+W .. #KEYS]      one index key per index change
-- ARGV[1]  the mode
-- ARGV[2]  the lock's token, or "" for a caller that holds no lock
-- ARGV[3]  W, the number of writes
-- ARGV[4]  the marks the caller accepts, as ",a,b," ("" is no mark)
-- ARGV[5]  the transaction's id (32 characters), or ""
-- ARGV[6]  the pending intent to store (prepare, primary), or ""
-- ARGV[7 ..]  per write: email, encoded record ("" deletes), the first
--             8 bytes (the version) of the record it replaces ("" when it
--             creates one), the head of its change feed event
--             (record.AppendEventHead), "" for a write that records none,
--             and "t" to end the record with the commit time, "" to write
--             it as it is (a copy); then per index change: "+" or "-", and
--             the member
--
-- Errors, each a code and a message (a reply without a space would get
-- Redis's ERR code instead): PARTMAP_LOCK_LOST (the lock is not the
-- caller's any more), PARTMAP_BUSY (another holds the lock of a caller
-- without one), PARTMAP_STALE (the partition bears a mark the caller does
-- not expect), PARTMAP_PENDING (a transaction is pending on the
-- partition: resolve it and run again), PARTMAP_CHANGED (a record is not
-- the one the caller read), PARTMAP_ABORTED (decide: the transaction was
-- aborted, or is not there).
--
-- Each write with an event head appends one entry to the feed when, and
-- only when, the write is applied (commit, decide, roll): its one field,
-- "e", is the head and the encoded record; its ID, the commit time. A
-- stamped record ends with that time ('T' and the Unix ms as a uvarint,
-- record.AppendCommitted), or, for a write without an event (a mirror),
-- with the master's TIME; the event's copy of it does not, its ID says it.
local mode = ARGV[1]
local writes = tonumber(ARGV[3])

if mode == 'roll' then
  local p = redis.call('GET', KEYS[5])
  if not p or string.sub(p, 1, 32) ~= ARGV[5] then
    -- Rolled forward already, perhaps by someone whose roll no replica
    -- has yet: a write, so that the WAIT after this counts for that one
    -- too (fence.lua).
    redis.call('SET', KEYS[6], ARGV[5], 'PX', 10000)
    return 0
  end
  redis.call('DEL', KEYS[5])
else
  local lock = redis.call('GET', KEYS[1])
  if ARGV[2] == '' then
    if lock then
      return redis.error_reply('PARTMAP_BUSY another writer holds the partition lock')
    end
  elseif lock ~= ARGV[2] then
    return redis.error_reply('PARTMAP_LOCK_LOST the partition lock is not the caller\'s')
  end
  if mode == 'decide' then
    if redis.call('GET', KEYS[6]) ~= 'prepared' then
      return redis.error_reply('PARTMAP_ABORTED the transaction was aborted')
    end
    redis.call('SET', KEYS[6], 'committed')
  else
    local state = redis.call('GET', KEYS[4]) or ''
    if not string.find(ARGV[4], ',' .. state .. ',', 1, true) then
      return redis.error_reply('PARTMAP_STALE the partition is marked "' .. state .. '"')
    end
    if redis.call('EXISTS', KEYS[5]) == 1 then
      return redis.error_reply('PARTMAP_PENDING a transaction is pending on the partition')
    end
    for w = 1, writes do
      -- GETRANGE reads only the version, and "" for a missing record.
      if redis.call('GETRANGE', KEYS[7 + w], 0, 7) ~= ARGV[7 + (w - 1) * 5 + 2] then
        return redis.error_reply('PARTMAP_CHANGED a record changed since it was read')
      end
    end
    if mode == 'prepare' or mode == 'primary' then
      redis.call('SET', KEYS[5], ARGV[6])
      if mode == 'primary' then redis.call('SET', KEYS[6], 'prepared') end
      return 1
    end
  end
end

local function uvarint(n)
  local b = ''
  while n >= 128 do
    b = b .. string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  return b .. string.char(n)
end

local delta, clock = 0, nil
for w = 1, writes do
  local k, a = 7 + w, 7 + (w - 1) * 5
  local email, value, prev, head, stamp = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local ms
  if head ~= '' then
    ms = tonumber(string.match(redis.call('XADD', KEYS[7], '*', 'e', head .. value), '^%d+'))
  end
  if value == '' then
    redis.call('DEL', KEYS[k])
    redis.call('ZREM', KEYS[3], email)
    if prev ~= '' then delta = delta - 1 end
  else
    if stamp ~= '' then
      if not ms then
        if not clock then
          local t = redis.call('TIME')
          clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        ms = clock
      end
      value = value .. 'T' .. uvarint(ms)
    end
    redis.call('SET', KEYS[k], value)
    redis.call('ZADD', KEYS[3], 0, email)
    if prev == '' then delta = delta + 1 end
  end
end
for k = 8 + writes, #KEYS do
  local a = 7 + writes * 5 + (k - 8 - writes) * 2
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
