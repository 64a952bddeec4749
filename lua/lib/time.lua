-- lib/time.lua: the server's clock.

-- Server time in ms, from Redis's clock (TIME: seconds * 1000 +
-- floor(microseconds / 1000)).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether server time + ms passes the int64 range, which PEXPIRE and
-- SET PX refuse. ms is a valid positive int64 string; it is compared
-- exactly, as two halves of at most 10 and 9 digits, with LLONG_MAX - now.
local function ttl_overflows(ms)
  if #ms < 19 then
    return false -- below 10^18, far from LLONG_MAX - now
  end
  local now = now_ms()
  local room_high = 9223372036 - math.floor(now / 1e9)
  local room_low = 854775807 - now % 1e9
  if room_low < 0 then
    room_high, room_low = room_high - 1, room_low + 1e9
  end
  local high, low = tonumber(string.sub(ms, 1, -10)), tonumber(string.sub(ms, -9))
  return high > room_high or (high == room_high and low > room_low)
end
