-- lib/zcommand.lua: ZUNION, ZINTER and their STORE variants as a client
-- sends them, for the AGGREGATE COUNT polyfills (lua/zcount.lua,
-- lua/zcountstore.lua). Needs lib/err.lua, lib/int.lua and lib/float.lua
-- before it.

-- ZUNION, ZINTER, ZUNIONSTORE, ZINTERSTORE read as Redis 8.8 reads them,
-- errors in its order and with its texts (numkeys; the key types, before
-- any option; the options, the last of each kind winning). args[first] is
-- numkeys; the sources follow it and are also `sources` (KEYS). Returns a
-- table { weights (nil: none) and weight_args (as given), aggregate ('sum',
-- 'min', 'max', 'count'), withscores }, or nil and the error reply.
local function zcommand_read(command, args, first, sources, store)
  local setnum = parse_int(args[first])
  if setnum == nil then
    return nil, err('ERR value is not an integer or out of range')
  end
  if setnum < 1 then
    return nil, err("ERR at least 1 input key is needed for '" .. command .. "' command")
  end
  if setnum > #args - first then
    return nil, err('ERR syntax error')
  end
  if setnum ~= #sources then
    return nil, err("ERR wrong number of arguments for '" .. command .. "' command")
  end
  for k = 1, #sources do
    local kind = redis.call('TYPE', sources[k]).ok
    if kind ~= 'zset' and kind ~= 'set' and kind ~= 'none' then
      return nil, err('WRONGTYPE Operation against a key holding the wrong kind of value')
    end
  end
  local read = { aggregate = 'sum', withscores = false }
  local j = first + setnum + 1
  while j <= #args do
    local remaining = #args - j + 1
    -- (read up to a NUL byte, as Redis's strcasecmp reads it)
    local option = string.lower(string.match(args[j], '^%Z*'))
    if remaining >= setnum + 1 and option == 'weights' then
      read.weights, read.weight_args = {}, {}
      for k = 1, setnum do
        read.weight_args[k] = args[j + k]
        read.weights[k] = parse_float(args[j + k])
        if read.weights[k] == nil then
          return nil, err('ERR weight value is not a float')
        end
      end
      j = j + 1 + setnum
    elseif remaining >= 2 and option == 'aggregate' then
      local value = string.lower(string.match(args[j + 1], '^%Z*'))
      if value ~= 'sum' and value ~= 'min' and value ~= 'max' and value ~= 'count' then
        return nil, err('ERR syntax error')
      end
      read.aggregate = value
      j = j + 2
    elseif remaining >= 1 and not store and option == 'withscores' then
      read.withscores = true
      j = j + 1
    else
      return nil, err('ERR syntax error')
    end
  end
  return read
end

-- The same call as Redis's own command, for when the last AGGREGATE is not
-- COUNT (an earlier COUNT was overridden): the sources, the last WEIGHTS,
-- the last AGGREGATE, WITHSCORES. Returns the argument list.
local function zcommand_native(command, dest, sources, read)
  local call = { command }
  if dest then
    call[#call + 1] = dest
  end
  call[#call + 1] = #sources
  for k = 1, #sources do
    call[#call + 1] = sources[k]
  end
  if read.weights then
    call[#call + 1] = 'WEIGHTS'
    for k = 1, #read.weight_args do
      call[#call + 1] = read.weight_args[k]
    end
  end
  call[#call + 1] = 'AGGREGATE'
  call[#call + 1] = read.aggregate
  if read.withscores then
    call[#call + 1] = 'WITHSCORES'
  end
  return call
end
