-- lib/zaggregate.lua: AGGREGATE COUNT of ZUNION/ZINTER computed in a
-- script, for a Redis that does not have it (it came with Redis 8.8): a
-- member's score is the sum of the weights of the sources that hold it
-- (1 each without WEIGHTS), whatever its score there. A source is a sorted
-- set or a plain set (the caller checked the types); a missing key is an
-- empty set. Needs lib/err.lua, lib/int.lua, lib/float.lua, lib/order.lua
-- and lib/zset.lua before it.

-- The members of a source (its scores play no part in a count).
local function zaggregate_members(key)
  local kind = redis.call('TYPE', key).ok
  if kind == 'zset' then
    return redis.call('ZRANGE', key, 0, -1)
  elseif kind == 'set' then
    return redis.call('SMEMBERS', key)
  end
  return {}
end

-- Sums in the order Redis adds them: sources from the smallest to the
-- largest (Redis sorts them by size first; equal sizes keep their order,
-- as glibc's merge sort does), each adding its weight to every member it
-- holds. inf + -inf is 0, as Redis makes every NaN sum. Returns
-- member -> score and the members (union: all of them; inter: those in
-- every source).
local function zaggregate_count(inter, sources, weights)
  local order = {}
  for k = 1, #sources do
    order[k] = { key = sources[k], weight = weights and weights[k] or 1, index = k,
      members = zaggregate_members(sources[k]) }
  end
  table.sort(order, function(a, b)
    if #a.members ~= #b.members then
      return #a.members < #b.members
    end
    return a.index < b.index
  end)
  local scores, members = {}, {}
  if inter then
    if #order == 0 or #order[1].members == 0 then
      return scores, members
    end
    -- Seen in how many sources so far: a member stays while it is in every
    -- one (a source listed twice holds it twice).
    local seen = {}
    for _, m in ipairs(order[1].members) do
      seen[m] = 1
      scores[m] = order[1].weight
    end
    for k = 2, #order do
      local w = order[k].weight
      for _, m in ipairs(order[k].members) do
        if seen[m] == k - 1 then
          seen[m] = k
          local s = scores[m] + w
          scores[m] = (s == s) and s or 0
        end
      end
    end
    for _, m in ipairs(order[1].members) do
      if seen[m] == #order then
        members[#members + 1] = m
      else
        scores[m] = nil
      end
    end
    return scores, members
  end
  for k = 1, #order do
    local w = order[k].weight
    for _, m in ipairs(order[k].members) do
      local s = scores[m]
      if s == nil then
        scores[m] = w
        members[#members + 1] = m
      else
        s = s + w
        scores[m] = (s == s) and s or 0
      end
    end
  end
  return scores, members
end

-- Stores the result at dest as ZUNIONSTORE does: dest replaced, or deleted
-- when the result is empty. Returns the number of members.
local function zaggregate_store(dest, scores, members)
  redis.call('DEL', dest)
  local args, used = { 'ZADD', dest }, 2
  for i = 1, #members do
    args[used + 1] = format_score(scores[members[i]])
    args[used + 2] = members[i]
    used = used + 2
    if i % (MEMBERS_PER_CALL / 2) == 0 or i == #members then
      redis.call(unpack(args, 1, used))
      used = 2
    end
  end
  return #members
end

-- ZUNION, ZINTER, ZUNIONSTORE, ZINTERSTORE read as Redis 8.8 reads them,
-- errors in its order and with its texts (numkeys; the key types, before
-- any option; the options, the last of each kind winning). args[first] is
-- numkeys; the sources follow it and are also `sources` (KEYS). Returns a
-- table { weights (nil: none) and weight_args (as given), aggregate ('sum',
-- 'min', 'max', 'count'), withscores }, or nil and the error reply.
local function zaggregate_read(command, args, first, sources, store)
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
local function zaggregate_native(command, dest, sources, read)
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
