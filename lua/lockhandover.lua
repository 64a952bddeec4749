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

--#include lib/err.lua
--#include lib/int.lua
--#include lib/time.lua

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
