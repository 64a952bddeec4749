#!lua
-- QACK leasekey member [member ...]
--
-- KEYS[1]  the lease set (a sorted set of member -> deadline in ms)
-- ARGV     the members that are finished
--
-- Removes the members from the lease set. Reply: how many were removed.

-- unpack() puts every value on Lua's C stack (LUAI_MAXCSTACK is 8000
-- slots), so one ZREM carries at most this many members.
local MEMBERS_PER_CALL = 3000

--#include lib/err.lua

if #KEYS ~= 1 or #ARGV < 1 then
  return err("ERR wrong number of arguments for 'qack' command")
end
local lease_key = KEYS[1]
local kind = redis.call('TYPE', lease_key).ok
if kind ~= 'zset' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

local removed = 0
for first = 1, #ARGV, MEMBERS_PER_CALL do
  local last = math.min(first + MEMBERS_PER_CALL - 1, #ARGV)
  removed = removed + redis.call('ZREM', lease_key, unpack(ARGV, first, last))
end
return removed
