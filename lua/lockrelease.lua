#!lua
-- LOCKRELEASE key token
--
-- KEYS[1]  the lock, a string key (acquired with SET key token NX PX ms)
-- ARGV[1]  the token the caller holds
--
-- Deletes the lock only if its value is exactly the token.
-- Reply: 1 if released, 0 if not held by that token (missing key included).

--#include lib/err.lua

if #KEYS ~= 1 or #ARGV ~= 1 then
  return err("ERR wrong number of arguments for 'lockrelease' command")
end
local key, token = KEYS[1], ARGV[1]
local kind = redis.call('TYPE', key).ok
if kind ~= 'string' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if redis.call('GET', key) ~= token then
  return 0
end
redis.call('DEL', key)
return 1
