-- Sliding window counter: allowed iff
--   prev·(W − elapsed) + (curr + c)·W <= L·W
-- computed exactly on decimal strings; then curr += c. Denials write nothing.
-- KEYS[1]  hash {k, curr, prev}
-- ARGV[1]  k, the window of now
-- ARGV[2]  k − 1, or "" when k = 0
-- ARGV[3]  c (<= L, so curr + c <= L when allowed: no saturation needed)
-- ARGV[4]  W − elapsed
-- ARGV[5]  W
-- ARGV[6]  L·W
-- ARGV[7]  TTL in ms: until (k+2)·W, when curr stops weighing
-- Returns {allowed 0/1, stored k, stored curr, stored prev} (before).
local s = redis.call('HMGET', KEYS[1], 'k', 'curr', 'prev')
local prev, curr = '0', '0'
if s[1] and s[1] == ARGV[1] then
  prev = s[3] or '0'
  curr = s[2] or '0'
elseif s[1] and ARGV[2] ~= '' and s[1] == ARGV[2] then
  prev = s[2] or '0'
end
local next_curr = add(big(curr), big(ARGV[3]))
local load = add(mul(big(prev), big(ARGV[4])), mul(next_curr, big(ARGV[5])))
if cmp(load, big(ARGV[6])) <= 0 then
  redis.call('HSET', KEYS[1], 'k', ARGV[1], 'curr', str(next_curr), 'prev', prev)
  expire_at_least(KEYS[1], ARGV[7])
  return { 1, s[1], s[2], s[3] }
end
return { 0, s[1], s[2], s[3] }
