-- Fixed window: add the cost to this window's counter, saturating at
-- i64::MAX, and make the counter live until the window's end.
-- KEYS[1]  the counter of window k
-- ARGV[1]  cost c (1 <= c <= L, so INCRBY cannot overflow below the threshold)
-- ARGV[2]  i64::MAX - c: a count above it saturates
-- ARGV[3]  TTL in ms: the window's end from the caller's now, rounded up
-- Returns the count before this attempt (nil: no counter).
local before = redis.call('GET', KEYS[1])
if before and cmp(big(before), big(ARGV[2])) > 0 then
  redis.call('SET', KEYS[1], '9223372036854775807', 'PX', ttl_at_least(KEYS[1], ARGV[3]))
else
  -- The reply is an integer, which Lua would turn into a double: unused.
  redis.call('INCRBY', KEYS[1], ARGV[1])
  expire_at_least(KEYS[1], ARGV[3])
end
return before
