#!lua
-- ZSNAPSHOT dest ttl-ms numkeys key [key ...] [WEIGHTS weight ...]
--           [AGGREGATE SUM|MIN|MAX|COUNT]
--
-- KEYS[1]   dest, the snapshot
-- KEYS[2..] the sources, numkeys of them (sorted sets or sets)
-- ARGV      ttl-ms, numkeys, the sources again, then the options as the
--           client sent them (any case; a repeated AGGREGATE's last wins)
--
-- Builds dest as ZUNIONSTORE would, with a time to live of ttl-ms, only if
-- dest does not exist yet; one script, so the check and the build are one
-- atomic step and no temporary key is ever made. Reply: [1, ttl-ms] when
-- it built dest, [0, remaining ttl in ms] when dest was there already. A
-- dest that is there with no time to live (a user's, or one an older
-- proxy's failed PEXPIRE left) keeps its content and gets ttl-ms now, so
-- that it is rebuilt once that is over, not answered [0, -1] forever. A
-- union with no member stores nothing (as ZUNIONSTORE) and replies
-- [1, ttl-ms]: a missing key reads as the empty snapshot. dest holding
-- another type: WRONGTYPE.
-- Its TTL is set by a command chosen before anything is written
-- (lib/time.lua's expiry_setter), which cannot fail after the union.
--
-- AGGREGATE COUNT (each member's score: the sum of the weights of the
-- sources that hold it, 1 each without WEIGHTS) is Redis's own where Redis
-- has it (8.8 and later), else computed here (lib/zaggregate.lua).
--
-- One redis.call carries at most what unpack() can put on Lua's C stack
-- (lib/zset.lua), so a union of thousands of sources, too many for one
-- ZUNIONSTORE call, is computed here with Redis's own arithmetic
-- (lib/zaggregate.lua): the same scores, bit for bit.

--#include lib/err.lua
--#include lib/int.lua
--#include lib/float.lua
--#include lib/time.lua
--#include lib/order.lua
--#include lib/zset.lua
--#include lib/zaggregate.lua

local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
if #KEYS < 2 or #ARGV < 3 then
  return err("ERR wrong number of arguments for 'zsnapshot' command")
end
local dest, ttl = KEYS[1], ARGV[1]
local ttl_ms = parse_int(ttl)
if ttl_ms == nil then
  return err('ERR value is not an integer or out of range')
end
if ttl_ms <= 0 then
  return err("ERR invalid expire time in 'zsnapshot' command")
end
local numkeys = parse_int(ARGV[2])
if numkeys == nil then
  return err('ERR value is not an integer or out of range')
end
if numkeys < 1 then
  return err("ERR at least 1 input key is needed for 'zsnapshot' command")
end
if numkeys > #ARGV - 2 then
  return err('ERR syntax error')
end
if numkeys ~= #KEYS - 1 then
  return err("ERR wrong number of arguments for 'zsnapshot' command")
end
-- The last WEIGHTS: its values and where its word is in ARGV (nil without).
local weights, weights_at
local aggregate = 'sum'
local i = 3 + numkeys
while i <= #ARGV do
  local option = string.lower(ARGV[i])
  if option == 'weights' and #ARGV - i >= numkeys then
    weights, weights_at = {}, i
    for k = 1, numkeys do
      weights[k] = parse_float(ARGV[i + k])
      if weights[k] == nil then
        return err('ERR weight value is not a float')
      end
    end
    i = i + 1 + numkeys
  elseif option == 'aggregate' and #ARGV - i >= 1 then
    aggregate = string.lower(ARGV[i + 1])
    if aggregate ~= 'sum' and aggregate ~= 'min' and aggregate ~= 'max' and aggregate ~= 'count' then
      return err('ERR syntax error')
    end
    i = i + 2
  else
    return err('ERR syntax error')
  end
end
local expire_command, expire_arg = expiry_setter(ttl)
if expire_command == nil then
  return err("ERR invalid expire time in 'zsnapshot' command")
end

local kind = redis.call('TYPE', dest).ok
if kind ~= 'none' then
  if kind ~= 'zset' then
    return err(WRONGTYPE)
  end
  local left = redis.call('PTTL', dest)
  if left == -1 then
    redis.call(expire_command, dest, expire_arg)
    left = redis.call('PTTL', dest)
  end
  return { 0, left }
end
local sources = {}
for k = 2, #KEYS do
  local source_kind = redis.call('TYPE', KEYS[k]).ok
  if source_kind ~= 'zset' and source_kind ~= 'set' and source_kind ~= 'none' then
    return err(WRONGTYPE)
  end
  sources[k - 1] = KEYS[k]
end

-- ZUNIONSTORE's own arguments: numkeys, the sources, and the options as
-- they came out (the last WEIGHTS, the last AGGREGATE), not as sent: a
-- Redis without COUNT refuses "AGGREGATE COUNT" even where a later
-- AGGREGATE overrides it.
local store_args = { 'ZUNIONSTORE', dest }
for k = 2, 2 + numkeys do
  store_args[#store_args + 1] = ARGV[k]
end
if weights then
  for k = weights_at, weights_at + numkeys do
    store_args[#store_args + 1] = ARGV[k]
  end
end
store_args[#store_args + 1] = 'AGGREGATE'
store_args[#store_args + 1] = aggregate
-- Redis's own command when its words fit in one call; else computed here.
local stored = false
if #store_args <= MEMBERS_PER_CALL then
  if aggregate ~= 'count' then
    redis.call(unpack(store_args))
    stored = true
  else
    -- Not Redis's own before 8.8 ("syntax error" at COUNT, all else having
    -- been checked above): then computed here.
    local reply = redis.pcall(unpack(store_args))
    stored = not (type(reply) == 'table' and reply.err)
  end
end
if not stored then
  zaggregate_store(dest, zaggregate_compute(false, sources, weights, aggregate))
end
if redis.call('EXISTS', dest) == 1 then
  redis.call(expire_command, dest, expire_arg)
end
return { 1, ttl_ms }
