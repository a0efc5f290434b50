-- Batches of checks, each all or nothing, as one atomic script. Within a
-- batch every item is decided on the state as it stands, then the batch
-- is denied if an enforcing item is not allowed, then the writes run: all
-- of them when the batch is allowed, only those of fixed windows that
-- count denied attempts when it is denied. Items of one batch are
-- distinct counters (Rust merges repeated ones), so no item sees another's
-- write; the batches of one call run one after the other, each seeing
-- the writes of those before it (several requests' batches share one
-- call: coalesce.rs).
--
-- One body, two forms (scripts.rs): a script run by EVALSHA, which ends
-- with `return batches(KEYS, ARGV)`, and a Redis 7 function library, which
-- registers `batches` once, so that a call does not re-create every local
-- function of decimal.lua and this file (a third of the script's time).
--
-- keys     every batch's item keys, batch after batch (fixed window: the
--          counter of the current window)
-- argv[1]  the number of batches g
-- Then per batch the number of its items n, and per item, in turn,
-- 2 + ARGS[algorithm] arguments:
--   algorithm  'fw' | 'sl' | 'sw' | 'gc'
--   flags      'e' enforcing or 's' shadow; then 'c' when a denial is
--              counted (fixed window counting denied attempts); 'n' when
--              the cost can never pass (read only, not allowed)
--   b+1 ..     the algorithm's arguments, below ('' where unused)
-- Returns per batch 'ok' and then 1 + SEEN[algorithm] values per item:
-- allowed ('1' or '0'), then the state it saw; or, when the batch raised
-- an error (a key of another type: WRONGTYPE), one value 'error: <the
-- error>' and nothing written by that batch (its reads come before its
-- writes), while the other batches go on. A call of one batch answers its
-- error as the call's error instead. ARGS and SEEN are mirrored in
-- batch.rs.
--
-- Each algorithm reads its arguments from argv[b + 1] on (no table per
-- item) and compares and adds them with decimal.lua's fast path (dcmp,
-- dadd: plain doubles where exact); the counters themselves are added by
-- Redis's own 64-bit INCRBY. A key the item creates gets its TTL with the
-- write (SET … PX, or PEXPIRE after ZADD); an existing one reads PTTL first
-- and only ever extends it. An algorithm returns whether the item is
-- allowed, its write as a closure for the batch to run once settled, and
-- the state it saw as up to three values (no table per item); told that
-- its item is alone in its batch (`alone`, whose write always runs), it
-- writes at once instead (a closure's upvalues are allocations of their
-- own in Lua 5.1).

-- i64::MAX, where a counter and a GCRA tat saturate.
local MAX_I64 = '9223372036854775807'

-- A fixed window's write (fixed_window below): the count before plus c,
-- saturating at i64::MAX, kept until the window's end.
local function fixed_write(argv, key, b, before)
  if not before then
    -- A new counter: nothing to add to, no TTL to keep.
    redis.call('SET', key, argv[b + 1], 'PX', argv[b + 4])
  elseif dcmp(before, argv[b + 3]) > 0 then
    redis.call('SET', key, MAX_I64, 'PX', ttl_at_least(key, argv[b + 4]))
  else
    -- before + c <= i64::MAX: exact in Redis's 64-bit integers.
    redis.call('INCRBY', key, argv[b + 1])
    expire_at_least(key, argv[b + 4])
  end
end

local function fixed_window(argv, key, never, counted, b, alone)
  -- b+1 cost c, b+2 L − c (allowed iff count <= L − c), b+3 i64::MAX − c,
  -- b+4 TTL in ms (the window's end). Sees: the count before.
  local before = redis.call('GET', key)
  if never then return false, nil, before end
  local allowed = not before or dcmp(before, argv[b + 2]) <= 0
  if not (allowed or counted) then return false, nil, before end
  if alone then
    fixed_write(argv, key, b, before)
    return allowed, nil, before
  end
  return allowed, function() fixed_write(argv, key, b, before) end, before
end

-- A sliding log's write (sliding_log below): c events at now, the log
-- kept W from now; n is the number of live events before them.
local function log_write(argv, key, b, n)
  local c, prefix = tonumber(argv[b + 3]), argv[b + 4]
  local args = {}
  for i = 1, c do
    args[#args + 1] = '0'
    args[#args + 1] = prefix .. i
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
  if n == 0 then
    -- An empty sorted set does not exist: the key is new, no TTL to keep.
    redis.call('PEXPIRE', key, argv[b + 5])
  else
    expire_at_least(key, argv[b + 5])
  end
end

local function sliding_log(argv, key, never, counted, b, alone)
  -- b+1 '(' .. first live instant (20 digits), or '' when every event is
  -- live; b+2 L − c; b+3 c; b+4 member prefix '<now>:<request id>:'; b+5
  -- TTL in ms (W). Members are '<20-digit ns>:<request id>:<i>', all
  -- scored 0, so lexicographic order is time order. Sees: n, the newest
  -- live member, and on a denial the j-th oldest (j = n − (L − c)).
  if argv[b + 1] ~= '' then
    -- Dead events change no decision: dropping them is safe in any batch.
    redis.call('ZREMRANGEBYLEX', key, '-', argv[b + 1])
  end
  local n = redis.call('ZCARD', key)
  local ns = string.format('%d', n)
  local newest = false
  if n > 0 then newest = redis.call('ZRANGE', key, -1, -1)[1] end
  if never then return false, nil, ns, newest, false end
  if dcmp(ns, argv[b + 2]) <= 0 then
    if alone then
      log_write(argv, key, b, n)
      return true, nil, ns, newest, false
    end
    return true, function() log_write(argv, key, b, n) end, ns, newest, false
  end
  -- Denied: n > L − c, so L − c < n < 2^53 and j = n − (L − c) <= n.
  local j = n - tonumber(argv[b + 2])
  local jth = redis.call('ZRANGE', key, j - 1, j - 1)[1]
  return false, nil, ns, newest, jth
end

-- A sliding window counter's write (sliding_window below): window k's
-- count and the one before it, kept until (k+2)·W.
local function window_write(argv, key, b, k, next_curr, prev)
  redis.call('HSET', key, 'k', k, 'curr', next_curr, 'prev', prev)
  expire_at_least(key, argv[b + 7])
end

-- x·y + u·v <= z on decimal strings; doubles when both products have at
-- most 15 digits (each below 10^15, the sum below 2^53), limbs otherwise.
local function products_at_most(x, y, u, v, z)
  if #x + #y <= 15 and #u + #v <= 15 then
    local load = tonumber(x) * tonumber(y) + tonumber(u) * tonumber(v)
    return dcmp(string.format('%d', load), z) <= 0
  end
  return cmp(add(mul(big(x), big(y)), mul(big(u), big(v))), big(z)) <= 0
end

local function sliding_window(argv, key, never, counted, b, alone)
  -- b+1 k, b+2 k − 1 or '' when k = 0, b+3 c, b+4 W − elapsed, b+5 W,
  -- b+6 L·W, b+7 TTL in ms (until (k+2)·W, when curr stops weighing).
  -- Allowed iff prev·(W − elapsed) + (curr + c)·W <= L·W. Sees: the
  -- stored k, curr, prev.
  local s = redis.call('HMGET', key, 'k', 'curr', 'prev')
  local s1, s2, s3 = s[1], s[2], s[3]
  if never then return false, nil, s1, s2, s3 end
  local k = argv[b + 1]
  local prev, curr = '0', '0'
  if s[1] and s[1] == k then
    prev = s[3] or '0'
    curr = s[2] or '0'
  elseif s[1] and argv[b + 2] ~= '' and s[1] == argv[b + 2] then
    prev = s[2] or '0'
  end
  local next_curr = dadd(curr, argv[b + 3])
  if products_at_most(prev, argv[b + 4], next_curr, argv[b + 5], argv[b + 6]) then
    if alone then
      window_write(argv, key, b, k, next_curr, prev)
      return true, nil, s1, s2, s3
    end
    return true, function() window_write(argv, key, b, k, next_curr, prev) end, s1, s2, s3
  end
  return false, nil, s1, s2, s3
end

-- GCRA's write on its fast path (gcra below): tat = now + d + c·T, kept
-- d + c·T (in ms, rounded up) plus the slack, never less than its TTL.
local function gcra_write(key, tat, d, ct, nh, nl, slack)
  local span = d + tonumber(ct)
  local hi, lo = nh, nl + span
  while lo >= HALF do hi, lo = hi + 1, lo - HALF end
  -- ceil(span / 10^6): span < 2^53, and a quotient with a remainder
  -- lies at least 10^-6 from an integer, far more than its rounding.
  local ms = math.ceil(span / 1000000)
  if ms < 1 then ms = 1 end
  local ttl
  if #slack <= 15 then
    -- ms < 10^10 and the slack < 10^15: their sum, and a larger PTTL
    -- below 2^53, are exact in doubles (no decimal strings to add).
    ttl = ms + tonumber(slack)
    if tat then
      local left = redis.call('PTTL', key)
      if left > ttl then ttl = left end
    end
    ttl = string.format('%d', ttl)
  else
    ttl = dadd(string.format('%d', ms), slack)
    if tat then ttl = ttl_at_least(key, ttl) end
  end
  redis.call('SET', key, unhalves(hi, lo), 'PX', ttl)
end

local function gcra(argv, key, never, counted, b, alone)
  -- b+1 now's high part (now div 10^15), b+2 its low part (now mod 10^15;
  -- now in ns), b+3 c·T, b+4 TTL slack in ms, b+5 B·T − c·T. tat0 =
  -- max(tat, now); allowed iff tat0 <= now + B·T − c·T; then tat =
  -- min(tat0 + c·T, i64::MAX), kept until tat. Sees: the tat.
  local tat = redis.call('GET', key)
  if never then return false, nil, tat end
  local nh, nl = tonumber(argv[b + 1]), tonumber(argv[b + 2])
  local ct, room = argv[b + 3], argv[b + 5]
  if #room <= 15 and #ct <= 15 and nh <= 9219 then
    -- Fast path: spans from now in doubles. d = tat0 − now; every span
    -- here stays below 4·10^15 < 2^53, and now + d below i64::MAX
    -- (now < 9220·10^15), so the cap at i64::MAX cannot bite.
    local d = 0
    if tat then
      local th, tl = halves(tat)
      local dh = th - nh
      if dh >= 2 then return false, nil, tat end -- d > 10^15 > B·T − c·T
      if dh >= 0 then
        d = dh * HALF + tl - nl
        if d < 0 then d = 0 end
      end
    end
    if d > tonumber(room) then return false, nil, tat end
    if alone then
      -- Alone in its batch, an allowed item is written: at once, without
      -- a closure (its upvalues cost Redis a sixteenth of the item).
      gcra_write(key, tat, d, ct, nh, nl, argv[b + 4])
      return true, nil, tat
    end
    local write = function() gcra_write(key, tat, d, ct, nh, nl, argv[b + 4]) end
    return true, write, tat
  end
  local now = unhalves(nh, nl)
  local tat0 = now
  if tat and dcmp(tat, now) > 0 then tat0 = tat end
  if dcmp(tat0, dadd(now, room)) > 0 then return false, nil, tat end
  local write = function()
    local new = dadd(tat0, ct)
    if dcmp(new, MAX_I64) > 0 then new = MAX_I64 end
    -- new <= i64::MAX, so new − now < 2^63, as ms_between needs.
    local ms = 1
    if dcmp(new, now) > 0 then ms = ms_between(new, now) end
    local ttl = dadd(string.format('%d', ms), argv[b + 4])
    if tat then ttl = ttl_at_least(key, ttl) end
    redis.call('SET', key, new, 'PX', ttl)
  end
  return true, write, tat
end

local decide = { fw = fixed_window, sl = sliding_log, sw = sliding_window, gc = gcra }
local ARGS = { fw = 4, sl = 5, sw = 7, gc = 5 }
local SEEN = { fw = 1, sl = 3, sw = 3, gc = 1 }

-- An item's flags: whether its cost can never pass ('n'), whether its
-- denial is counted ('c').
local function flagged(flags)
  if flags == 'e' then return false, false end
  return string.find(flags, 'n', 1, true) ~= nil, string.find(flags, 'c', 1, true) ~= nil
end

-- Appends an item's values to out: allowed, then the `count` values of
-- the state it saw (false for a value that is not there).
local function put(out, ok, count, s1, s2, s3)
  local m = #out
  if ok then out[m + 1] = '1' else out[m + 1] = '0' end
  out[m + 2] = s1 or false
  if count == 3 then
    out[m + 3] = s2 or false
    out[m + 4] = s3 or false
  end
end

-- One batch of n items: keys from keys[kb + 1], arguments from argv[base];
-- appends its values to out.
local function batch(keys, kb, argv, base, n, out)
  if n == 1 then
    -- One item is its own batch: an item has a write only when it is
    -- allowed or is a fixed window counting a denial, and either way the
    -- rule below writes it. No tables to settle: they cost about a tenth
    -- of a lone GCRA call's instructions in Redis
    -- (docs/design/redis-script.md#a-batch-of-one).
    local code, flags = argv[base], argv[base + 1]
    local never, counts = flagged(flags)
    local ok, write, s1, s2, s3 = decide[code](argv, keys[kb + 1], never, counts, base + 1, true)
    if write then write() end
    put(out, ok, SEEN[code], s1, s2, s3)
    return
  end
  local codes, writes, counted, allowed, seen1, seen2, seen3 = {}, {}, {}, {}, {}, {}, {}
  local denied = false
  for i = 1, n do
    local code, flags = argv[base], argv[base + 1]
    local never, counts = flagged(flags)
    local ok, write, s1, s2, s3 = decide[code](argv, keys[kb + i], never, counts, base + 1)
    if not ok and string.byte(flags, 1) == 101 then denied = true end -- 'e'
    codes[i] = code
    allowed[i] = ok
    writes[i] = write or false
    counted[i] = counts
    seen1[i], seen2[i], seen3[i] = s1 or false, s2 or false, s3 or false
    base = base + 2 + ARGS[code]
  end
  for i = 1, n do
    if writes[i] and (not denied or counted[i]) then writes[i]() end
    put(out, allowed[i], SEEN[codes[i]], seen1[i], seen2[i], seen3[i])
  end
end

-- An error raised by redis.call: a table with err (Redis 7) or a string.
local function message(e)
  if type(e) == 'table' then e = e.err or e[1] end
  return 'error: ' .. tostring(e)
end

-- A batch's number of items; most have one, which needs no conversion.
local function items(n)
  if n == '1' then return 1 end
  return tonumber(n)
end

-- Every batch of the call: keys and argv as described at the top.
local function batches(keys, argv)
  if argv[1] == '1' then
    -- One batch alone (no load): an error is the call's own, so it needs
    -- no pcall, and the values go straight into the reply, made with
    -- room for 'ok' and one item's values, four at most (#reply is
    -- still 1: the nils are free slots, so it does not regrow).
    local reply = { 'ok', nil, nil, nil, nil }
    batch(keys, 0, argv, 3, items(argv[2]), reply)
    return reply
  end
  local reply = {}
  local base, kb = 2, 0
  for _ = 1, tonumber(argv[1]) do
    local n = items(argv[base])
    -- The batch's values go straight into the reply; on an error they
    -- are taken back out (no value is nil, so #reply is the end).
    local start = #reply
    reply[start + 1] = 'ok'
    local ok, e = pcall(batch, keys, kb, argv, base + 1, n, reply)
    if not ok then
      for j = #reply, start + 2, -1 do reply[j] = nil end
      reply[start + 1] = message(e)
    end
    base = base + 1
    for _ = 1, n do base = base + 2 + ARGS[argv[base]] end
    kb = kb + n
  end
  return reply
end
