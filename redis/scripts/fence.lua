-- Writes a short-lived key in a partition's slot, unless transaction
-- ARGV[1]'s intent is pending there. It changes nothing else: with
-- MinReplicasAck, the WAIT after it proves that every earlier write to
-- the slot's master, such as another resolver's roll-forward, has reached
-- a replica. The intent is checked here, on the master the WAIT is sent
-- to, since a failover may have brought it back since it was read.
--
-- KEYS[1]  the partition's fence key
-- KEYS[2]  the partition's pending intent
-- ARGV[1]  the transaction's id (32 characters)
--
-- Returns 1, or 0 if the intent is pending (nothing written).
local p = redis.call('GET', KEYS[2])
if p and string.sub(p, 1, 32) == ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)
return 1
