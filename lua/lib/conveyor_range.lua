-- lib/conveyor_range.lua: the score ranges and scored replies of Redis's
-- commands on conveyor keys. Needs lib/conveyor_command.lua and
-- lib/conveyor_bound.lua (and what they need) before it.

-- Scores with their members (ZRANGE ... WITHSCORES, flat as Lua gets it)
-- as a reply of positions: flat in RESP2, [member, score] pairs in RESP3,
-- as Redis replies them.
local function conveyor_scored_reply(flat, offset)
  local reply = {}
  for i = 1, #flat, 2 do
    local score = conveyor_position(flat[i + 1], offset)
    if conveyor_resp3 then
      reply[#reply + 1] = { flat[i], score }
    else
      reply[#reply + 1] = flat[i]
      reply[#reply + 1] = score
    end
  end
  return reply
end

-- ZRANGE, its older forms and ZRANGESTORE (the options from argument
-- `first_option` on): whether it is by score, whether scores are wanted,
-- and where the score range's ends are (argument indexes, min first); nil
-- when the options are not Redis's (it refuses them itself), or BYLEX.
local function conveyor_range_form(first_option)
  local byscore, rev, withscores = false, false, false
  local fixed_by, fixed_rev = false, false
  if conveyor_name == 'zrangebyscore' then
    byscore, fixed_by = true, true
  elseif conveyor_name == 'zrevrangebyscore' then
    byscore, rev, fixed_by, fixed_rev = true, true, true, true
  elseif conveyor_name == 'zrevrange' then
    rev, fixed_by, fixed_rev = true, true, true
  end
  local bylex = false
  local i = first_option
  while i < conveyor_argc do
    local option = string.lower(carg(i))
    local left = conveyor_argc - i - 1
    if option == 'withscores' and conveyor_name ~= 'zrangestore' then
      withscores = true
    elseif option == 'limit' and left >= 2 and conveyor_name ~= 'zrevrange' then
      i = i + 2
    elseif not fixed_rev and not rev and option == 'rev' then
      rev = true
    elseif not fixed_by and not byscore and not bylex and option == 'bylex' then
      bylex = true
    elseif not fixed_by and not byscore and not bylex and option == 'byscore' then
      byscore = true
    else
      return nil
    end
    i = i + 1
  end
  if bylex then
    return nil
  end
  -- ZRANGE ... BYSCORE REV and ZREVRANGEBYSCORE take max first.
  local min_at, max_at = first_option - 2, first_option - 1
  if byscore and rev then
    min_at, max_at = max_at, min_at
  end
  return byscore, withscores, min_at, max_at
end

-- The command's arguments with the score range's ends (arguments min_at
-- and max_at) translated for `key` at `offset`; nil when one is no number
-- (Redis's error then).
local function conveyor_range_args(key, offset, min_at, max_at)
  local min, min_ex = conveyor_parse_bound(carg(min_at))
  local max, max_ex = conveyor_parse_bound(carg(max_at))
  if min == nil or max == nil then
    return nil
  end
  local args = { unpack(ARGV, 3) }
  args[min_at + 1] = conveyor_bound(key, min, min_ex, true, offset)
  args[max_at + 1] = conveyor_bound(key, max, max_ex, false, offset)
  return args
end
