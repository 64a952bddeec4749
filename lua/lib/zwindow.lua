-- lib/zwindow.lua: the body of ZWINDOW (lua/zwindow.lua, lua/conveyor_zwindow.lua), its
-- scores through lib/zline.lua's hooks.

if #KEYS ~= 1 or #ARGV < 2 then
  return err("ERR wrong number of arguments for 'zwindow' command")
end
local key, window, member = KEYS[1], ARGV[1], ARGV[2]
local window_ms = parse_int(window)
if window_ms == nil then
  return err('ERR value is not an integer or out of range')
end
if window_ms <= 0 then
  return err("ERR invalid expire time in 'zwindow' command")
end
-- Chosen before anything is written, and cannot fail after the writes
-- (lib/time.lua): a window is never left without its time to live.
local expire_command, expire_arg = expiry_setter(window)
if expire_command == nil then
  return err("ERR invalid expire time in 'zwindow' command")
end

local limit -- nil without LIMIT
local i = 3
while i <= #ARGV do
  if string.lower(ARGV[i]) == 'limit' and i + 1 <= #ARGV then
    local failure
    limit, failure = parse_count(ARGV[i + 1])
    if limit == nil then
      return failure
    end
    i = i + 2
  else
    return err('ERR syntax error')
  end
end

local kind = redis.call('TYPE', key).ok
if kind ~= 'zset' and kind ~= 'none' then
  return err('WRONGTYPE Operation against a key holding the wrong kind of value')
end

local now = now_ms()
-- Lua numbers: Redis formats them with %.17g, exactly.
redis.call('ZREMRANGEBYSCORE', key, '-inf', zline_bound(1, now - window_ms, false))
zline_emptied(1)
local count = redis.call('ZCARD', key)
local present = redis.call('ZSCORE', key, member)
if not present and limit and count >= limit then
  return { 0, count }
end
redis.call('ZADD', key, zline_stored(1, now), member)
if not present then
  count = count + 1
end
-- window-ms goes as the client's digits (or, from 10^18 on, the exact
-- expiry's): a Lua number would be formatted as 1e+17 from 10^17 on.
redis.call(expire_command, key, expire_arg)
zline_expired(1)
return { 1, count }
