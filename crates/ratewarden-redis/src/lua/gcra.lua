-- GCRA: tat0 = max(tat, now); allowed iff tat0 + c·T − now <= B·T, i.e.
-- tat0 <= now + B·T − c·T; then tat = min(tat0 + c·T, i64::MAX), kept
-- until tat.
-- KEYS[1]  the tat (ns since the epoch, decimal)
-- ARGV[1]  now (ns)
-- ARGV[2]  now + B·T − c·T (c <= B, so >= now)
-- ARGV[3]  c·T
-- ARGV[4]  i64::MAX, where instants saturate
-- ARGV[5]  TTL slack in ms, added to the time until tat
-- Returns {allowed 0/1, stored tat (before)}.
local tat = redis.call('GET', KEYS[1])
local now = big(ARGV[1])
local tat0 = now
if tat then
  local stored = big(tat)
  if cmp(stored, now) > 0 then tat0 = stored end
end
if cmp(tat0, big(ARGV[2])) > 0 then
  return { 0, tat }
end
local new = add(tat0, big(ARGV[3]))
local max = big(ARGV[4])
if cmp(new, max) > 0 then new = max end
local ttl = { 1 }
if cmp(new, now) > 0 then
  ttl = div_ceil_small(sub(new, now), 1000000)
end
ttl = str(add(ttl, big(ARGV[5])))
redis.call('SET', KEYS[1], str(new), 'PX', ttl_at_least(KEYS[1], ttl))
return { 1, tat }
