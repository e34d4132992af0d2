-- Aborts a transaction that has not reached its commit point: a
-- "prepared" record becomes "aborted". Any other status stays: a
-- committed transaction is rolled forward, not aborted. A record that
-- stays is written again, unchanged: with MinReplicasAck, the WAIT that
-- follows then proves its status has reached a replica, which a caller
-- must know before it acts on it in other partitions (a failover to a
-- replica without it could turn it back into "prepared").
--
-- KEYS[1]  the transaction's record, in its primary partition's slot
--
-- Returns the status after the call: "aborted", "committed", or "" when
-- the record is not there (the transaction is over).
local s = redis.call('GET', KEYS[1])
if s == 'prepared' then
  redis.call('SET', KEYS[1], 'aborted')
  return 'aborted'
end
if s then
  redis.call('SET', KEYS[1], s)
end
return s or ''
