-- Releases a lock if the caller still owns it: after its time to live it
-- may be somebody else's.
--
-- KEYS[1]  the lock
-- ARGV[1]  the caller's token
--
-- Returns 1 if the lock was released, 0 if it was not the caller's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
