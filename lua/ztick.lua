#!lua
-- ZTICK key delta threshold [WITHSCORES]
--
-- KEYS[1]  the sorted set
-- ARGV[1]  ztick-max-members, hidden, set by the proxy (0 = no limit)
-- ARGV[2]  delta, a float (may be negative, may be inf)
-- ARGV[3]  threshold, a float
-- ARGV[4]  WITHSCORES (any case), optional
--
-- Adds delta to every score. Members whose new score is >= threshold are
-- removed. Reply: the removed members in ascending order of new score (ties
-- in member order, as ZRANGE), each followed by its new score with
-- WITHSCORES. Missing key: empty array. Nothing is written when an argument
-- is refused, when the set is larger than ztick-max-members, or when a new
-- score would be NaN (inf + -inf).

-- unpack() puts every value on Lua's C stack (LUAI_MAXCSTACK is 8000
-- slots), so one ZADD carries at most this many score/member pairs.
local PAIRS_PER_CALL = 3000

local function err(msg)
  return redis.error_reply(msg)
end

-- Redis's string2ll: optional '-', no '+', no leading zeros ('0' itself is
-- fine), no spaces, within int64. Lua numbers are doubles, so the range is
-- checked on the digits. Returns the value (exact below 2^53) or nil.
local function parse_int(s)
  if s == '0' then
    return 0
  end
  local sign, digits = string.match(s, '^(%-?)([1-9]%d*)$')
  if digits == nil or #digits > 19 then
    return nil
  end
  if #digits == 19 then
    local limit = (sign == '-') and '9223372036854775808' or '9223372036854775807'
    if digits > limit then
      return nil
    end
  end
  return tonumber(s)
end

-- Redis's getDoubleFromObject: glibc strtod over the whole string (decimal,
-- hex such as 0x1p3, inf/infinity in any case), refusing a leading space,
-- NaN, overflow to +-inf and underflow to 0. The shape is checked here first
-- because Lua's tonumber, the same strtod, also skips spaces around the
-- number and stops at a NUL byte.
local function parse_float(s)
  local body = string.match(s, '^[+-]?(.*)$')
  local word = string.lower(body)
  if word == 'inf' or word == 'infinity' then
    return (string.sub(s, 1, 1) == '-') and -math.huge or math.huge
  end
  local mantissa, exponent, nonzero, exponent_shape
  if string.find(body, '^0[xX]') then
    mantissa, exponent = string.match(body, '^0[xX]([%x.]*)(.*)$')
    nonzero, exponent_shape = '[1-9a-fA-F]', '^[pP][+-]?%d+$'
  else
    mantissa, exponent = string.match(body, '^([%d.]*)(.*)$')
    nonzero, exponent_shape = '[1-9]', '^[eE][+-]?%d+$'
  end
  if not string.find(mantissa, '%x') or string.find(mantissa, '%..*%.') then
    return nil
  end
  if exponent ~= '' and not string.find(exponent, exponent_shape) then
    return nil
  end
  local value = tonumber(s)
  if value == nil or value ~= value or value == math.huge or value == -math.huge then
    return nil
  end
  if value == 0 and string.find(mantissa, nonzero) then
    return nil
  end
  return value
end

-- A score as Redis 7.0 replies it (%.17g, infinities as inf and -inf).
local function format_score(x)
  if x == math.huge then
    return 'inf'
  elseif x == -math.huge then
    return '-inf'
  end
  return string.format('%.17g', x)
end

-- Byte order (memcmp), which is how Redis orders members with equal scores.
-- Lua's '<' on strings uses strcoll, which follows the server's locale.
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

if #KEYS ~= 1 or #ARGV < 3 then
  return err("ERR wrong number of arguments for 'ztick' command")
end
local key = KEYS[1]
local max_members = parse_int(ARGV[1])
if max_members == nil then
  return err('ERR value is not an integer or out of range')
end
if max_members < 0 then
  return err('ERR value is out of range, must be positive')
end
local delta = parse_float(ARGV[2])
local threshold = parse_float(ARGV[3])
if delta == nil or threshold == nil then
  return err('ERR value is not a valid float')
end
local withscores = false
if #ARGV == 4 and string.lower(ARGV[4]) == 'withscores' then
  withscores = true
elseif #ARGV > 3 then
  return err('ERR syntax error')
end
local kind = redis.call('TYPE', key).ok
if kind ~= 'zset' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

local card = redis.call('ZCARD', key)
if card == 0 then
  return {}
end
if max_members > 0 and card > max_members then
  return err(string.format(
    'ERR ZTICK refused: the sorted set has %d members, over ztick-max-members (%s)',
    card, ARGV[1]))
end

-- range = member, score, member, score ... in ascending order; the scores
-- are %.17g strings, so tonumber gives back the stored doubles exactly.
local range = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
local n = #range / 2
local function new_score(i)
  return tonumber(range[2 * i]) + delta
end

-- Only inf + -inf is NaN, and the infinities sit at the ends of the range.
if (delta == math.huge and tonumber(range[2]) == -math.huge)
    or (delta == -math.huge and tonumber(range[2 * n]) == math.huge) then
  return err('ERR resulting score is not a number (NaN)')
end

-- Adding the same delta to every score cannot reorder them (rounding is
-- monotonic), so the members that reach the threshold are a suffix of the
-- range: find where it starts by bisection.
local low, high = 1, n + 1
while low < high do
  local mid = math.floor((low + high) / 2)
  if new_score(mid) >= threshold then
    high = mid
  else
    low = mid + 1
  end
end
local first_removed = low

local reply = {}
for i = first_removed, n do
  reply[#reply + 1] = range[2 * i - 1]
  if withscores then
    reply[#reply + 1] = new_score(i)
  end
end

-- Rounding can give members whose old scores differed the same new score;
-- Redis orders those by member, so re-sort such runs of the reply.
local function sort_tied_runs()
  local i = first_removed
  while i <= n do
    local j = i
    while j < n and new_score(j + 1) == new_score(i) do
      j = j + 1
    end
    if range[2 * i] ~= range[2 * j] then
      local run = {}
      for k = i, j do
        run[#run + 1] = range[2 * k - 1]
      end
      table.sort(run, bytes_less)
      local stride = withscores and 2 or 1
      for k = 1, #run do
        reply[(i - first_removed + k - 1) * stride + 1] = run[k]
      end
    end
    i = j + 1
  end
end
sort_tied_runs()

if withscores then
  for k = 2, #reply, 2 do
    reply[k] = format_score(reply[k])
  end
end

if first_removed <= n then
  redis.call('ZREMRANGEBYRANK', key, first_removed - 1, -1)
end

-- The rest get their new scores, sent in the order that lets Redis update
-- each skiplist node in place (zslUpdateScore keeps a node where it is when
-- its new score is still strictly between its neighbours'): for a positive
-- delta the highest score first, so each node's right neighbour has already
-- moved up; for a negative delta the lowest first. The scores go as Lua
-- numbers, which Redis formats with %.17g: the stored score is exactly the
-- double old + delta, as ZINCRBY would make it.
if delta ~= 0 and first_removed > 1 then
  local from, to, step = first_removed - 1, 1, -1
  if delta < 0 then
    from, to, step = 1, first_removed - 1, 1
  end
  local args = { 'ZADD', key }
  local used = 2
  for i = from, to, step do
    args[used + 1] = tonumber(range[2 * i]) + delta -- new_score(i), inlined: hot loop
    args[used + 2] = range[2 * i - 1]
    used = used + 2
    if used == 2 + 2 * PAIRS_PER_CALL then
      redis.call(unpack(args, 1, used))
      used = 2
    end
  end
  if used > 2 then
    redis.call(unpack(args, 1, used))
  end
end

return reply
