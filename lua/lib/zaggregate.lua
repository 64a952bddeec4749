-- lib/zaggregate.lua: AGGREGATE COUNT of ZUNION/ZINTER computed in a
-- script, for a Redis that does not have it (it came with Redis 8.8): a
-- member's score is the sum of the weights of the sources that hold it
-- (1 each without WEIGHTS), whatever its score there. A source is a sorted
-- set or a plain set (the caller checked the types); a missing key is an
-- empty set. Needs lib/order.lua and lib/zset.lua before it.

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
