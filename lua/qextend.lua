#!lua
-- QEXTEND leasekey member ms
--
-- KEYS[1]  the lease set (a sorted set of member -> deadline in ms)
-- ARGV[1]  the member
-- ARGV[2]  ms, a positive integer
--
-- If the member is in the lease set (its deadline may have passed, as long
-- as no QRECLAIM has taken it back), sets its deadline to server time + ms.
-- Reply: 1 if extended, 0 if the member is not leased.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/time.lua

if #KEYS ~= 1 or #ARGV ~= 2 then
  return err("ERR wrong number of arguments for 'qextend' command")
end
local lease_key, member = KEYS[1], ARGV[1]
local ms = parse_int(ARGV[2])
if ms == nil then
  return err('ERR value is not an integer or out of range')
end
if ms <= 0 then
  return err("ERR invalid expire time in 'qextend' command")
end
local kind = redis.call('TYPE', lease_key).ok
if kind ~= 'zset' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

if not redis.call('ZSCORE', lease_key, member) then
  return 0
end
-- A Lua number: Redis formats it with %.17g, exact for any deadline.
redis.call('ZADD', lease_key, now_ms() + ms, member)
return 1
