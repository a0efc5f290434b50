-- Exact arithmetic on non-negative integers written as canonical decimal
-- strings (no sign, no leading zeros). Redis runs Lua 5.1, whose only
-- number type is a double: exact to 2^53 only, while ratewarden's times
-- (u64 nanoseconds), counts (up to i64::MAX) and products such as L·W
-- (up to 2^127) are larger. So every such value travels as a string and
-- is computed on here as little-endian limbs of 7 decimal digits: a limb
-- product is below 10^14 and a column sum stays far below 2^53.
-- Comparisons are numeric on limbs, never Lua string order (which follows
-- the server's locale).

local BASE = 10000000

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

-- The larger of ttl_ms (a decimal string) and the key's remaining TTL:
-- a TTL is never shortened, so the state outlives every request that
-- still needs it (an instance whose clock is ahead computes a shorter
-- one). TTLs in milliseconds stay far below 2^53, so tonumber is exact.
local function ttl_at_least(key, ttl_ms)
  local left = redis.call('PTTL', key)
  if left > tonumber(ttl_ms) then return string.format('%d', left) end
  return ttl_ms
end

local function expire_at_least(key, ttl_ms)
  redis.call('PEXPIRE', key, ttl_at_least(key, ttl_ms))
end
