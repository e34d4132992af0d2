-- Takes a lock under a named lease (the whole-map lock), or takes it over
-- when it is held under that name already, for a new time to live.
--
-- KEYS[1]  the lock
-- ARGV[1]  the lease's name, the lock's token
-- ARGV[2]  the time to live, in milliseconds
--
-- Returns 1 if the lock is now the lease's, 0 if somebody else holds it.
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
