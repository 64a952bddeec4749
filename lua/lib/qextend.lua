-- lib/qextend.lua: the body of QEXTEND (lua/qextend.lua, lua/conveyor_qextend.lua), its
-- scores through lib/zline.lua's hooks.

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
redis.call('ZADD', lease_key, zline_stored(1, now_ms() + ms), member)
return 1
