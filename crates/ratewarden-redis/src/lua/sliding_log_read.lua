-- Sliding log, read only (status, and costs that can never pass): the
-- live count, the newest live event and, when a request of cost c would
-- be denied, the j-th oldest live event. Writes nothing.
-- KEYS[1]  the sorted set
-- ARGV[1]  "[" .. first live instant (20 digits), or "-" when every event is live
-- ARGV[2]  L - c, or "" when the request can never pass (no j-th event needed)
-- Returns {n, newest live member, j-th oldest live member}.
local n = redis.call('ZLEXCOUNT', KEYS[1], ARGV[1], '+')
local ns = string.format('%d', n)
local newest = false
if n > 0 then
  newest = redis.call('ZREVRANGEBYLEX', KEYS[1], '+', ARGV[1], 'LIMIT', 0, 1)[1]
end
local jth = false
if ARGV[2] ~= '' and dcmp(ns, ARGV[2]) > 0 then
  local j = n - tonumber(ARGV[2])
  jth = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', j - 1, 1)[1]
end
return { ns, newest, jth }
