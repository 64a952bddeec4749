-- lib/zsnapshot.lua: the body of ZSNAPSHOT (lua/zsnapshot.lua, lua/conveyor_zsnapshot.lua), its
-- scores through lib/zline.lua's hooks.

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
    zline_expired(1)
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
-- (a source with an offset: computed here, with its positions)
local offsets = zline_offsets(2)
zline_stored(1, 0) -- (a stale offset of dest goes)
local stored = false
if #store_args <= MEMBERS_PER_CALL and not offsets then
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
  zaggregate_store(dest, zaggregate_compute(false, sources, weights, aggregate, offsets))
end
if redis.call('EXISTS', dest) == 1 then
  redis.call(expire_command, dest, expire_arg)
end
return { 1, ttl_ms }
