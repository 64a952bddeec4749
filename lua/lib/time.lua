-- lib/time.lua: the server's clock.

-- Server time in ms, from Redis's clock (TIME: seconds * 1000 +
-- floor(microseconds / 1000)).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- How to give a key a time to live of ms (a valid positive int64 string),
-- decided now and carried out later in the script by a command that cannot
-- fail then, however long the script ran in between: nil when server time +
-- ms passes the int64 range (PEXPIRE and SET PX refuse it: "invalid expire
-- time"), else the command and its argument:
--   below 10^18 ms: 'PEXPIRE', ms. Server time + 10^18 is within int64
--     (9.2 * 10^18) until the clock reads the year 260,000,000: no run time
--     can push it over. TIME is not read.
--   from 10^18 ms (31.7 million years) on: 'PEXPIREAT', the exact digits of
--     server time (read here) + ms. Not PEXPIRE: Redis 7.0 adds its clock
--     as it is when PEXPIRE runs, so a script that writes for long enough
--     between this check and its PEXPIRE passes int64 there, after the write
--     ("invalid expire time in 'pexpire'", the key left with no TTL).
--     PEXPIREAT adds nothing, and this sum was checked. The time to live
--     then counts from this check, not from the PEXPIRE: a difference of the
--     script's run time, on at least 31.7 million years.
-- The sum is exact: two halves of at most 10 and 9 digits, each within a
-- double's 2^53.
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
