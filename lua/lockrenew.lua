#!lua
-- LOCKRENEW key token ms
--
-- KEYS[1]  the lock, a string key (acquired with SET key token NX PX ms)
-- ARGV[1]  the token the caller holds
-- ARGV[2]  the new time to live in ms, a positive integer
--
-- Sets the lock's time to live to ms (PEXPIRE) only if its value is
-- exactly the token.
-- Reply: 1 if renewed, 0 if not held by that token (missing key included).

--#include lib/err.lua
--#include lib/int.lua
--#include lib/time.lua

if #KEYS ~= 1 or #ARGV ~= 2 then
  return err("ERR wrong number of arguments for 'lockrenew' command")
end
local key, token, ms = KEYS[1], ARGV[1], ARGV[2]
local ms_value = parse_int(ms)
if ms_value == nil then
  return err('ERR value is not an integer or out of range')
end
if ms_value <= 0 or ttl_overflows(ms) then
  return err("ERR invalid expire time in 'lockrenew' command")
end
local kind = redis.call('TYPE', key).ok
if kind ~= 'string' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if redis.call('GET', key) ~= token then
  return 0
end
-- ms goes as the client's digits: a Lua number would lose precision
-- beyond 2^53 and be formatted as 1e+17 from 10^17 on.
redis.call('PEXPIRE', key, ms)
return 1
