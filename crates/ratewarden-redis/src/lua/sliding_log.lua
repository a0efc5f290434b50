-- Sliding log: drop dead events, count the live ones, and record c
-- events at now when n + c <= L.
-- The sorted set's scores are all 0 and its members are
-- "<now, 20-digit zero-padded ns>:<request id>:<i>", so lexicographic
-- order is time order to the nanosecond (scores are doubles and would
-- round nanoseconds).
-- KEYS[1]  the sorted set
-- ARGV[1]  "(" .. first live instant (20 digits), or "" when every event is live
-- ARGV[2]  L - c (c <= L): allowed iff n <= L - c
-- ARGV[3]  c
-- ARGV[4]  member prefix "<now>:<request id>:"
-- ARGV[5]  TTL in ms: W from now, rounded up
-- Returns {allowed 0/1, n before, newest live member, j-th oldest live
-- member (only when denied, j = n + c - L)}.
if ARGV[1] ~= '' then
  redis.call('ZREMRANGEBYLEX', KEYS[1], '-', ARGV[1])
end
local n = redis.call('ZCARD', KEYS[1])
local ns = string.format('%d', n)
local newest = false
if n > 0 then newest = redis.call('ZRANGE', KEYS[1], -1, -1)[1] end
if cmp(big(ns), big(ARGV[2])) <= 0 then
  local c = tonumber(ARGV[3])
  local args = {}
  for i = 1, c do
    args[#args + 1] = '0'
    args[#args + 1] = ARGV[4] .. i
    if #args >= 1000 then
      redis.call('ZADD', KEYS[1], unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', KEYS[1], unpack(args)) end
  expire_at_least(KEYS[1], ARGV[5])
  return { 1, ns, newest, false }
end
-- Denied: n > L - c, so L - c < n is small and j = n - (L - c) <= n.
local j = n - tonumber(ARGV[2])
local jth = redis.call('ZRANGE', KEYS[1], j - 1, j - 1)[1]
return { 0, ns, newest, jth }
