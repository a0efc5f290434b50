-- A batch of checks, all or nothing, as one atomic script: every item is
-- decided on the state as it stands, then the batch is denied if an
-- enforcing item is not allowed, then the writes run: all of them when the
-- batch is allowed, only those of fixed windows that count denied
-- attempts when it is denied. Items are distinct counters (Rust merges
-- repeated ones), so no item sees another's write.
--
-- KEYS[i]  item i's key (fixed window: the counter of the current window)
-- ARGV[1]  the number of items n
-- Per item, 9 arguments from ARGV[2 + 9·(i − 1)]:
--   algorithm  'fw' | 'sl' | 'sw' | 'gc'
--   flags      'e' enforcing or 's' shadow; then 'c' when a denial is
--              counted (fixed window counting denied attempts); 'n' when
--              the cost can never pass (read only, not allowed)
--   a1 .. a7   the algorithm's arguments, below ('' where unused)
-- Returns 5 values per item: allowed ('1' or '0'), then the state it saw.

local function fixed_window(key, flags, a)
  -- a1 cost c, a2 L − c (allowed iff count <= L − c), a3 i64::MAX − c,
  -- a4 TTL in ms (the window's end). Sees: the count before.
  local before = redis.call('GET', key)
  if string.find(flags, 'n', 1, true) then
    return false, nil, { before or false }
  end
  local allowed = cmp(big(before or '0'), big(a[2])) <= 0
  local write = nil
  if allowed or string.find(flags, 'c', 1, true) then
    write = function()
      if before and cmp(big(before), big(a[3])) > 0 then
        redis.call('SET', key, '9223372036854775807', 'PX', ttl_at_least(key, a[4]))
      else
        redis.call('INCRBY', key, a[1])
        expire_at_least(key, a[4])
      end
    end
  end
  return allowed, write, { before or false }
end

local function sliding_log(key, flags, a)
  -- a1 '(' .. first live instant (20 digits), or '' when every event is
  -- live; a2 L − c; a3 c; a4 member prefix '<now>:<request id>:'; a5 TTL
  -- in ms (W). Members are '<20-digit ns>:<request id>:<i>', all scored
  -- 0, so lexicographic order is time order. Sees: n, the newest live
  -- member, and on a denial the j-th oldest (j = n − (L − c)).
  if a[1] ~= '' then
    -- Dead events change no decision: dropping them is safe in any batch.
    redis.call('ZREMRANGEBYLEX', key, '-', a[1])
  end
  local n = redis.call('ZCARD', key)
  local ns = string.format('%d', n)
  local newest = false
  if n > 0 then newest = redis.call('ZRANGE', key, -1, -1)[1] end
  if string.find(flags, 'n', 1, true) then
    return false, nil, { ns, newest, false }
  end
  if cmp(big(ns), big(a[2])) <= 0 then
    local write = function()
      local c = tonumber(a[3])
      local args = {}
      for i = 1, c do
        args[#args + 1] = '0'
        args[#args + 1] = a[4] .. i
        if #args >= 1000 then
          redis.call('ZADD', key, unpack(args))
          args = {}
        end
      end
      if #args > 0 then redis.call('ZADD', key, unpack(args)) end
      expire_at_least(key, a[5])
    end
    return true, write, { ns, newest, false }
  end
  -- Denied: n > L − c, so j = n − (L − c) <= n.
  local j = n - tonumber(a[2])
  local jth = redis.call('ZRANGE', key, j - 1, j - 1)[1]
  return false, nil, { ns, newest, jth }
end

local function sliding_window(key, flags, a)
  -- a1 k, a2 k − 1 or '' when k = 0, a3 c, a4 W − elapsed, a5 W, a6 L·W,
  -- a7 TTL in ms (until (k+2)·W, when curr stops weighing). Allowed iff
  -- prev·(W − elapsed) + (curr + c)·W <= L·W. Sees: the stored k, curr, prev.
  local s = redis.call('HMGET', key, 'k', 'curr', 'prev')
  local seen = { s[1] or false, s[2] or false, s[3] or false }
  if string.find(flags, 'n', 1, true) then
    return false, nil, seen
  end
  local prev, curr = '0', '0'
  if s[1] and s[1] == a[1] then
    prev = s[3] or '0'
    curr = s[2] or '0'
  elseif s[1] and a[2] ~= '' and s[1] == a[2] then
    prev = s[2] or '0'
  end
  local next_curr = add(big(curr), big(a[3]))
  local load = add(mul(big(prev), big(a[4])), mul(next_curr, big(a[5])))
  if cmp(load, big(a[6])) <= 0 then
    local write = function()
      redis.call('HSET', key, 'k', a[1], 'curr', str(next_curr), 'prev', prev)
      expire_at_least(key, a[7])
    end
    return true, write, seen
  end
  return false, nil, seen
end

local function gcra(key, flags, a)
  -- a1 now (ns), a2 now + B·T − c·T, a3 c·T, a4 i64::MAX, a5 TTL slack
  -- in ms. tat0 = max(tat, now); allowed iff tat0 <= now + B·T − c·T;
  -- then tat = min(tat0 + c·T, i64::MAX), kept until tat. Sees: the tat.
  local tat = redis.call('GET', key)
  if string.find(flags, 'n', 1, true) then
    return false, nil, { tat or false }
  end
  local now = big(a[1])
  local tat0 = now
  if tat then
    local stored = big(tat)
    if cmp(stored, now) > 0 then tat0 = stored end
  end
  if cmp(tat0, big(a[2])) > 0 then
    return false, nil, { tat or false }
  end
  local write = function()
    local new = add(tat0, big(a[3]))
    local max = big(a[4])
    if cmp(new, max) > 0 then new = max end
    local ttl = { 1 }
    if cmp(new, now) > 0 then
      ttl = div_ceil_small(sub(new, now), 1000000)
    end
    ttl = str(add(ttl, big(a[5])))
    redis.call('SET', key, str(new), 'PX', ttl_at_least(key, ttl))
  end
  return true, write, { tat or false }
end

local decide = { fw = fixed_window, sl = sliding_log, sw = sliding_window, gc = gcra }

local n = tonumber(ARGV[1])
local writes, counted, seen, allowed = {}, {}, {}, {}
local denied = false
for i = 1, n do
  local base = 2 + 9 * (i - 1)
  local flags = ARGV[base + 1]
  local a = {}
  for j = 1, 7 do a[j] = ARGV[base + 1 + j] end
  local ok, write, state = decide[ARGV[base]](KEYS[i], flags, a)
  if not ok and string.sub(flags, 1, 1) == 'e' then denied = true end
  allowed[i] = ok
  writes[i] = write
  counted[i] = string.find(flags, 'c', 1, true) ~= nil
  seen[i] = state
end
local reply = {}
for i = 1, n do
  if writes[i] and (not denied or counted[i]) then writes[i]() end
  if allowed[i] then reply[#reply + 1] = '1' else reply[#reply + 1] = '0' end
  for j = 1, 4 do reply[#reply + 1] = seen[i][j] or false end
end
return reply
