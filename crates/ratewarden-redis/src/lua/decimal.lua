-- Exact arithmetic on non-negative integers written as canonical decimal
-- strings (no sign, no leading zeros; every value the scripts see is one:
-- Rust's `to_string`, `string.format('%d')` and Redis's INCRBY and SET of
-- such values write nothing else). Redis runs Lua 5.1, whose only number
-- type is a double: exact to 2^53 only, while ratewarden's times (u64
-- nanoseconds), counts (up to i64::MAX) and products such as L·W (up to
-- 2^127) are larger. So every such value travels as a string, and:
--
-- * the fast path (`dcmp`, `dadd`): a string of at most 15 digits is
--   below 10^15 < 2^53, so `tonumber` is exact and so is the sum of two;
--   up to 30 digits a value is compared 15 digits at a time and added as
--   two halves, hi·10^15 + lo (`halves`), with no table built;
-- * the limbs (`big`, `add`, `sub`, `mul`, `div_ceil_small`): longer
--   values and products, as little-endian limbs of 7 decimal digits (a
--   limb product is below 10^14 and a column sum stays far below 2^53).
--
-- Comparisons are numeric (canonical strings: the longer is the larger),
-- never Lua string order (which follows the server's locale).

local BASE = 10000000
local HALF = 1000000000000000 -- 10^15

local function trim(a)
  while #a > 1 and a[#a] == 0 do a[#a] = nil end
  return a
end

-- "123456789012" -> {6789012, 12345}
local function big(s)
  local a = {}
  local i = #s
  while i > 0 do
    local j = i - 6
    if j < 1 then j = 1 end
    a[#a + 1] = tonumber(string.sub(s, j, i))
    i = j - 1
  end
  if #a == 0 then a[1] = 0 end
  return trim(a)
end

local function str(a)
  a = trim(a)
  local parts = { string.format('%d', a[#a]) }
  for i = #a - 1, 1, -1 do parts[#parts + 1] = string.format('%07d', a[i]) end
  return table.concat(parts)
end

-- -1, 0 or 1 as a < b, a == b, a > b
local function cmp(a, b)
  if #a ~= #b then
    if #a < #b then return -1 else return 1 end
  end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then
      if a[i] < b[i] then return -1 else return 1 end
    end
  end
  return 0
end

local function add(a, b)
  local r, carry = {}, 0
  local n = #a
  if #b > n then n = #b end
  for i = 1, n do
    local s = (a[i] or 0) + (b[i] or 0) + carry
    if s >= BASE then r[i] = s - BASE; carry = 1 else r[i] = s; carry = 0 end
  end
  if carry > 0 then r[n + 1] = carry end
  return r
end

-- a - b for a >= b
local function sub(a, b)
  local r, borrow = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - borrow
    if s < 0 then r[i] = s + BASE; borrow = 1 else r[i] = s; borrow = 0 end
  end
  return trim(r)
end

local function mul(a, b)
  local r = {}
  for i = 1, #a + #b do r[i] = 0 end
  for i = 1, #a do
    local carry, ai = 0, a[i]
    for j = 1, #b do
      local cur = r[i + j - 1] + ai * b[j] + carry
      carry = math.floor(cur / BASE)
      r[i + j - 1] = cur - carry * BASE
    end
    local k = i + #b
    while carry > 0 do
      local cur = r[k] + carry
      carry = math.floor(cur / BASE)
      r[k] = cur - carry * BASE
      k = k + 1
    end
  end
  return trim(r)
end

-- ceil(a / m) for a small m (m < BASE)
local function div_ceil_small(a, m)
  local q, rem = {}, 0
  for i = #a, 1, -1 do
    local cur = rem * BASE + a[i]
    local d = math.floor(cur / m)
    q[i] = d
    rem = cur - d * m
  end
  q = trim(q)
  if rem > 0 then q = add(q, { 1 }) end
  return q
end

-- A string of at most 30 digits as its two exact halves hi, lo
-- (s = hi·10^15 + lo, each below 10^15).
local function halves(s)
  local n = #s
  if n <= 15 then return 0, tonumber(s) end
  return tonumber(string.sub(s, 1, n - 15)), tonumber(string.sub(s, n - 14))
end

-- The canonical string of hi·10^15 + lo (lo below 10^15).
local function unhalves(hi, lo)
  if hi == 0 then return string.format('%d', lo) end
  return string.format('%d%015d', hi, lo)
end

-- -1, 0 or 1 as the decimal strings a < b, a == b, a > b
local function dcmp(a, b)
  if a == b then return 0 end
  local na, nb = #a, #b
  if na ~= nb then
    if na < nb then return -1 else return 1 end
  end
  local x, y
  if na <= 15 then
    x, y = tonumber(a), tonumber(b)
  elseif na <= 30 then
    -- Equal lengths: the leading 15 digits, then the rest.
    x, y = tonumber(string.sub(a, 1, 15)), tonumber(string.sub(b, 1, 15))
    if x == y then x, y = tonumber(string.sub(a, 16)), tonumber(string.sub(b, 16)) end
  else
    return cmp(big(a), big(b))
  end
  if x == y then return 0 elseif x < y then return -1 else return 1 end
end

-- The decimal string a + b
local function dadd(a, b)
  local na, nb = #a, #b
  if na <= 15 and nb <= 15 then
    -- Below 2·10^15 < 2^53: exact, and %d prints it whole.
    return string.format('%d', tonumber(a) + tonumber(b))
  end
  if na <= 30 and nb <= 30 then
    -- hi + hi + carry is below 2·10^15 < 2^53: exact, and a hi of 16
    -- digits still prints as the leading digits.
    local ah, al = halves(a)
    local bh, bl = halves(b)
    local hi, lo = ah + bh, al + bl
    if lo >= HALF then hi, lo = hi + 1, lo - HALF end
    return unhalves(hi, lo)
  end
  return str(add(big(a), big(b)))
end

-- ceil((a − b) / 10^6) as a number, for b < a and a − b below 2^63 (a
-- time span in nanoseconds to milliseconds): the quotient is below
-- 10^13 < 2^53, so every step is exact.
local function ms_between(a, b)
  local ah, al = halves(a)
  local bh, bl = halves(b)
  local hi, lo = ah - bh, al - bl
  if lo < 0 then hi, lo = hi - 1, lo + HALF end
  -- a − b = hi·10^15 + lo = hi·10^15 + q·10^6 + r
  local q = math.floor(lo / 1000000)
  local r = lo - q * 1000000
  if r < 0 then q, r = q - 1, r + 1000000 elseif r >= 1000000 then q, r = q + 1, r - 1000000 end
  if r > 0 then q = q + 1 end
  return hi * 1000000000 + q
end

-- Extends the key's TTL to at least ttl_ms (a decimal string of
-- milliseconds): a TTL is never shortened, so the state outlives every
-- request that still needs it (an instance whose clock is ahead computes
-- a shorter one). A key without a TTL (PTTL -1) gets one. TTLs in
-- milliseconds stay far below 2^53, so tonumber is exact.
local function expire_at_least(key, ttl_ms)
  if redis.call('PTTL', key) < tonumber(ttl_ms) then
    redis.call('PEXPIRE', key, ttl_ms)
  end
end

-- The larger of ttl_ms (a decimal string) and the key's remaining TTL,
-- for a SET that replaces the key.
local function ttl_at_least(key, ttl_ms)
  local left = redis.call('PTTL', key)
  if left > tonumber(ttl_ms) then return string.format('%d', left) end
  return ttl_ms
end
