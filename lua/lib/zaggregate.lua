-- lib/zaggregate.lua: ZUNION/ZINTER computed in a script exactly as Redis
-- computes them (t_zset.c, zunionInterDiffGenericCommand), with
-- AGGREGATE COUNT (Redis 8.8) too: for a Redis without COUNT, and for a
-- call too long for one redis.call. A source is a sorted set or a plain
-- set (the caller checked the types; a set member's score is 1); a missing
-- key is empty. Needs lib/order.lua and lib/zset.lua before it.

-- A source's members and their scores, flat (m1, s1, m2, s2, ...), or
-- only its members when `scored` is false (COUNT ignores the scores).
local function zaggregate_read_source(key, scored)
  local kind = redis.call('TYPE', key).ok
  if kind == 'zset' then
    if scored then
      return redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    end
    return redis.call('ZRANGE', key, 0, -1)
  elseif kind == 'set' then
    local members = redis.call('SMEMBERS', key)
    if not scored then
      return members
    end
    local items = {}
    for i = 1, #members do
      items[2 * i - 1], items[2 * i] = members[i], 1
    end
    return items
  end
  return {}
end

-- The union (or intersection) of the sources with aggregate 'sum', 'min',
-- 'max' or 'count', in Redis's order: sources from the smallest to the
-- largest (equal sizes keep their order, as glibc's merge sort keeps
-- them), each member's value its score times its source's weight (COUNT:
-- the weight alone, whatever the score), a NaN value made 0, then combined
-- with what the member has so far: SUM and COUNT add (a NaN sum is 0), MIN
-- and MAX compare as Redis does. Lua's numbers are the same doubles, so
-- every score comes out bit for bit as Redis's. Returns member -> score
-- and the members (union: in the order first met; inter: those in every
-- source, in the smallest source's order). offsets (optional): what to
-- add to each source's scores first (a conveyor key's offset).
local function zaggregate_compute(inter, sources, weights, aggregate, offsets)
  local scored = aggregate ~= 'count'
  local step = scored and 2 or 1
  local order = {}
  for k = 1, #sources do
    local items = zaggregate_read_source(sources[k], scored)
    order[k] = { weight = weights and weights[k] or 1, index = k, items = items, size = #items / step,
      offset = offsets and offsets[k] or 0 }
  end
  table.sort(order, function(a, b)
    if a.size ~= b.size then
      return a.size < b.size
    end
    return a.index < b.index
  end)
  local function value(source, i)
    if not scored then
      return source.weight
    end
    local score = tonumber(source.items[i + 1])
    if source.offset ~= 0 then -- (never 0 + -0, which is 0)
      score = score + source.offset
    end
    local v = source.weight * score
    return (v == v) and v or 0
  end
  local function combine(s, v)
    if aggregate == 'min' then
      return (v < s) and v or s
    elseif aggregate == 'max' then
      return (v > s) and v or s
    end
    s = s + v
    return (s == s) and s or 0
  end
  local scores, members = {}, {}
  if inter then
    -- In how many sources so far: a member stays while it is in every one
    -- (a source given twice holds it twice).
    local seen = {}
    for k, source in ipairs(order) do
      for i = 1, #source.items, step do
        local m = source.items[i]
        if k == 1 then
          seen[m], scores[m] = 1, value(source, i)
        elseif seen[m] == k - 1 then
          seen[m], scores[m] = k, combine(scores[m], value(source, i))
        end
      end
    end
    local first = order[1]
    for i = 1, first and #first.items or 0, step do
      local m = first.items[i]
      if seen[m] == #order then
        members[#members + 1] = m
      else
        scores[m] = nil
      end
    end
    return scores, members
  end
  for _, source in ipairs(order) do
    for i = 1, #source.items, step do
      local m = source.items[i]
      local s = scores[m]
      if s == nil then
        scores[m] = value(source, i)
        members[#members + 1] = m
      else
        scores[m] = combine(s, value(source, i))
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

-- The reply of ZUNION or ZINTER for that result: score order, ties in
-- byte order (members grouped by score, the groups sorted by score, each
-- group by member); with WITHSCORES each score as this server prints it,
-- nested pairs in RESP3.
local function zaggregate_reply(scores, members, withscores, resp3)
  local groups, order = {}, {}
  for _, m in ipairs(members) do
    local s = scores[m]
    local group = groups[s]
    if not group then
      group = {}
      groups[s] = group
      order[#order + 1] = s
    end
    group[#group + 1] = m
  end
  table.sort(order)
  local less = not collation_is_bytes() and bytes_less or nil
  local reply = {}
  for _, s in ipairs(order) do
    local group = groups[s]
    table.sort(group, less)
    for _, m in ipairs(group) do
      if not withscores then
        reply[#reply + 1] = m
      elseif resp3 then
        reply[#reply + 1] = { m, { double = scores[m] } }
      else
        reply[#reply + 1] = m
        reply[#reply + 1] = { double = scores[m] }
      end
    end
  end
  return reply
end
