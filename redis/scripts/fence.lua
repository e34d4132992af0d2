-- Writes a short-lived key in a partition's slot. It changes nothing
-- else: with MinReplicasAck, the WAIT after it proves that every earlier
-- write to the slot's master, such as another resolver's roll-forward,
-- has reached a replica.
--
-- KEYS[1]  the partition's fence key
-- ARGV[1]  the transaction's id
redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000)
return 1
