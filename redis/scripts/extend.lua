-- Renews a held lock's time to live, if the caller still owns it.
--
-- KEYS[1]  the lock
-- ARGV[1]  the caller's token
-- ARGV[2]  the new time to live, in milliseconds
--
-- Returns 1 if renewed, 0 if the lock is gone or somebody else's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
