#!lua
-- LOCKHANDOVER key oldtoken newtoken ms
--
-- KEYS[1]  the lock, a string key (acquired with SET key token NX PX ms)
-- ARGV[1]  the token the caller holds
-- ARGV[2]  the token the lock passes to
-- ARGV[3]  the new time to live in ms, a positive integer
--
-- Only if the lock's value is exactly oldtoken: sets it to newtoken with a
-- time to live of ms (SET key newtoken PX ms).
-- Reply: 1 if handed over, 0 if not held by oldtoken (missing key included).

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

-- Whether server time + ms passes the int64 range, which PEXPIRE and
-- SET PX refuse. ms is a valid positive int64 string; it is compared
-- exactly, as two halves of at most 10 and 9 digits, with LLONG_MAX - now.
local function ttl_overflows(ms)
  if #ms < 19 then
    return false -- below 10^18, far from LLONG_MAX - now
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local room_high = 9223372036 - math.floor(now / 1e9)
  local room_low = 854775807 - now % 1e9
  if room_low < 0 then
    room_high, room_low = room_high - 1, room_low + 1e9
  end
  local high, low = tonumber(string.sub(ms, 1, -10)), tonumber(string.sub(ms, -9))
  return high > room_high or (high == room_high and low > room_low)
end

if #KEYS ~= 1 or #ARGV ~= 3 then
  return err("ERR wrong number of arguments for 'lockhandover' command")
end
local key, old_token, new_token, ms = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local ms_value = parse_int(ms)
if ms_value == nil then
  return err('ERR value is not an integer or out of range')
end
if ms_value <= 0 or ttl_overflows(ms) then
  return err("ERR invalid expire time in 'lockhandover' command")
end
local kind = redis.call('TYPE', key).ok
if kind ~= 'string' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if redis.call('GET', key) ~= old_token then
  return 0
end
-- ms goes as the client's digits: a Lua number would lose precision
-- beyond 2^53 and be formatted as 1e+17 from 10^17 on.
redis.call('SET', key, new_token, 'PX', ms)
return 1
