-- lib/ztick.lua: ZTICK's arguments and its reply, shared by ztick.lua
-- (every key) and conveyor_tick.lua (a conveyor key). Needs lib/err.lua,
-- lib/float.lua and lib/order.lua before it.

-- delta, threshold and WITHSCORES from ZTICK's arguments after the key,
-- args[first..]: the three values, or nil and the error reply.
local function ztick_args(args, first)
  local delta = parse_float(args[first])
  local threshold = parse_float(args[first + 1])
  if delta == nil or threshold == nil then
    return nil, err('ERR value is not a valid float')
  end
  local extra = #args - first - 1
  if extra == 1 and string.lower(args[first + 2]) == 'withscores' then
    return delta, threshold, true
  elseif extra > 0 then
    return nil, err('ERR syntax error')
  end
  return delta, threshold, false
end

-- The reply for the members at ranks `range` (ZRANGE ... WITHSCORES),
-- each moved by delta: in ascending order of the new score. Rounding can
-- give members whose old scores differed the same new score, and Redis
-- orders equal scores by member, so such runs are re-sorted.
local function ztick_reply(range, delta, withscores)
  local count = #range / 2
  local members, scores = {}, {}
  for i = 1, count do
    members[i] = range[2 * i - 1]
    scores[i] = tonumber(range[2 * i]) + delta
  end
  local i = 1
  while i <= count do
    local j = i
    while j < count and scores[j + 1] == scores[i] do
      j = j + 1
    end
    if range[2 * i] ~= range[2 * j] then -- old scores differed within the run
      local run = {}
      for k = i, j do
        run[#run + 1] = members[k]
      end
      table.sort(run, bytes_less)
      for k = i, j do
        members[k] = run[k - i + 1]
      end
    end
    i = j + 1
  end
  local reply = {}
  for k = 1, count do
    reply[#reply + 1] = members[k]
    if withscores then
      reply[#reply + 1] = format_score(scores[k])
    end
  end
  return reply
end
