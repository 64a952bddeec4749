-- lib/time.lua: the server's clock.

-- Server time in ms, from Redis's clock (TIME: seconds * 1000 +
-- floor(microseconds / 1000)).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- How to give a key a time to live of ms (a valid positive int64 string)
-- later in the script by a command that cannot fail then, however long the
-- script ran: nil when server time + ms passes int64 now, else the command
-- and its argument. Below 10^18 ms: PEXPIRE ms (server time + 10^18 stays
-- within int64 until the year 260,000,000). From 10^18 on: PEXPIREAT of the
-- exact sum checked here (two halves, each within 2^53), since Redis 7.0's
-- PEXPIRE adds its clock as it is when it runs, which could pass int64
-- after the script's writes (lua/README.md, ZSNAPSHOT, the time to live).
local function expiry_setter(ms)
  if #ms < 19 then
    return 'PEXPIRE', ms
  end
  local now = now_ms()
  local high = tonumber(string.sub(ms, 1, -10)) + math.floor(now / 1e9)
  local low = tonumber(string.sub(ms, -9)) + now % 1e9
  if low >= 1e9 then
    high, low = high + 1, low - 1e9
  end
  if high > 9223372036 or (high == 9223372036 and low > 854775807) then
    return nil
  end
  return 'PEXPIREAT', string.format('%.0f%09.0f', high, low)
end

-- Whether server time + ms passes the int64 range, which PEXPIRE and
-- SET PX refuse (ms: a valid positive int64 string). For a script whose
-- only write is the command that takes ms (nothing to leave behind if it
-- refused after all).
local function ttl_overflows(ms)
  return expiry_setter(ms) == nil
end
