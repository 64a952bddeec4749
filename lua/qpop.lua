#!lua
-- QPOP key [COUNT n] [MAXSCORE max|NOW] [LEASE leasekey ms]
--
-- KEYS[1]  the queue, a sorted set (lowest score = highest priority)
-- KEYS[2]  the lease set, present exactly when LEASE is given
-- ARGV     the options as the client sent them, in any order, keywords in
--          any case; a repeated option's last value wins. LEASE's key name
--          stays in ARGV, but the write goes to KEYS[2].
--
-- Pops the lowest-score members (ties in member order). MAXSCORE pops only
-- members with score <= max (NOW = server time in ms). LEASE moves each
-- popped member into the lease set with score = server time + ms.
-- Reply without COUNT: [member, score], or nil when nothing qualifies.
-- Reply with COUNT: member, score, member, score ... (possibly empty).
-- Scores are the strings Redis returned for them.

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

-- Calls `command key` followed by items[1..n], each item preceded by
-- `score` when one is given, in calls small enough for unpack().
local function call_chunked(command, key, score, items)
  local args, used, total = { command, key }, 2, 0
  local per_call = score and MEMBERS_PER_CALL / 2 or MEMBERS_PER_CALL
  for i = 1, #items do
    if score then
      used = used + 1
      args[used] = score
    end
    used = used + 1
    args[used] = items[i]
    if i % per_call == 0 or i == #items then
      total = total + redis.call(unpack(args, 1, used))
      used = 2
    end
  end
  return total
end

local WRONG_ARGS = "ERR wrong number of arguments for 'qpop' command"
if #KEYS < 1 or #KEYS > 2 then
  return err(WRONG_ARGS)
end

local count       -- nil without COUNT
local count_arg   -- COUNT's digits, passed on verbatim (exact for any int64)
local max_score   -- nil without MAXSCORE
local max_is_now = false
local lease_ms    -- nil without LEASE
local i = 1
while i <= #ARGV do
  local option = string.lower(ARGV[i])
  if option == 'count' and i + 1 <= #ARGV then
    count = parse_int(ARGV[i + 1])
    if count == nil then
      return err('ERR value is not an integer or out of range')
    end
    if count < 0 then
      return err('ERR value is out of range, must be positive')
    end
    count_arg = ARGV[i + 1]
    i = i + 2
  elseif option == 'maxscore' and i + 1 <= #ARGV then
    if string.lower(ARGV[i + 1]) == 'now' then
      max_is_now, max_score = true, nil
    else
      max_is_now, max_score = false, parse_float(ARGV[i + 1])
      if max_score == nil then
        return err('ERR value is not a valid float')
      end
    end
    i = i + 2
  elseif option == 'lease' and i + 2 <= #ARGV then
    lease_ms = parse_int(ARGV[i + 2])
    if lease_ms == nil then
      return err('ERR value is not an integer or out of range')
    end
    if lease_ms <= 0 then
      return err("ERR invalid expire time in 'qpop' command")
    end
    i = i + 3
  else
    return err('ERR syntax error')
  end
end
-- The lease key is declared in KEYS exactly when LEASE is given.
if #KEYS ~= (lease_ms and 2 or 1) then
  return err(WRONG_ARGS)
end

local key, lease_key = KEYS[1], KEYS[2]
if not type_ok(key) or (lease_key and not type_ok(lease_key)) then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if count == 0 then
  return {}
end
local now
if max_is_now or lease_ms then
  now = now_ms()
end
if max_is_now then
  max_score = now
end

-- BYSCORE with LIMIT takes the count as given, so COUNT needs no arithmetic
-- (a rank range would need count - 1, inexact beyond 2^53).
local range = redis.call('ZRANGE', key, '-inf', max_score or '+inf', 'BYSCORE',
  'LIMIT', 0, count_arg or 1, 'WITHSCORES')
if #range == 0 then
  if count == nil then
    return false
  end
  return {}
end

local members = {}
for k = 1, #range, 2 do
  members[#members + 1] = range[k]
end
call_chunked('ZREM', key, nil, members)
if lease_ms then
  call_chunked('ZADD', lease_key, now + lease_ms, members)
end
return range
