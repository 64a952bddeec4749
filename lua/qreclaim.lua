#!lua
-- QRECLAIM leasekey key score|NOW [COUNT n]
--
-- KEYS[1]  the lease set (a sorted set of member -> deadline in ms)
-- KEYS[2]  the queue the members go back to
-- ARGV[1]  the score they get in the queue, a float, or NOW (server time
--          in ms, any case)
-- ARGV     then options: COUNT n (keyword in any case, last one wins)
--
-- Moves members whose deadline has passed (deadline <= server time), oldest
-- deadline first, at most COUNT of them, from the lease set back into the
-- queue. Reply: the members moved, in that order.

-- unpack() puts every value on Lua's C stack (LUAI_MAXCSTACK is 8000
-- slots), so one call carries at most this many members.
local MEMBERS_PER_CALL = 3000

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

-- Server time in ms, from Redis's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function type_ok(key)
  local kind = redis.call('TYPE', key).ok
  return kind == 'zset' or kind == 'none'
end

if #KEYS ~= 2 or #ARGV < 1 then
  return err("ERR wrong number of arguments for 'qreclaim' command")
end
local lease_key, key = KEYS[1], KEYS[2]

local score_is_now = string.lower(ARGV[1]) == 'now'
local score
if not score_is_now then
  score = parse_float(ARGV[1])
  if score == nil then
    return err('ERR value is not a valid float')
  end
end

local count       -- nil without COUNT: every expired lease
local count_arg   -- COUNT's digits, passed on verbatim (exact for any int64)
local i = 2
while i <= #ARGV do
  if string.lower(ARGV[i]) == 'count' and i + 1 <= #ARGV then
    count = parse_int(ARGV[i + 1])
    if count == nil then
      return err('ERR value is not an integer or out of range')
    end
    if count < 0 then
      return err('ERR value is out of range, must be positive')
    end
    count_arg = ARGV[i + 1]
    i = i + 2
  else
    return err('ERR syntax error')
  end
end

if not type_ok(lease_key) or not type_ok(key) then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if count == 0 then
  return {}
end

local now = now_ms()
if score_is_now then
  score = now
end
local expired
if count_arg then
  expired = redis.call('ZRANGE', lease_key, '-inf', now, 'BYSCORE', 'LIMIT', 0, count_arg)
else
  expired = redis.call('ZRANGE', lease_key, '-inf', now, 'BYSCORE')
end

-- Out of the lease set first, then into the queue: if both names are the
-- same key, the members end up there with the new score.
for first = 1, #expired, MEMBERS_PER_CALL do
  local last = math.min(first + MEMBERS_PER_CALL - 1, #expired)
  redis.call('ZREM', lease_key, unpack(expired, first, last))
  local args, used = { 'ZADD', key }, 2
  for k = first, last do
    args[used + 1] = score -- a Lua number: Redis formats it with %.17g, exactly
    args[used + 2] = expired[k]
    used = used + 2
  end
  redis.call(unpack(args, 1, used))
end
return expired
