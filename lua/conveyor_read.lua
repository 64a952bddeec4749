#!lua flags=no-writes
-- The read-only commands on a conveyor key (docs/conveyor.md): ZSCORE,
-- ZMSCORE, ZRANK and ZREVRANK WITHSCORE, ZRANGE (BYSCORE, WITHSCORES),
-- ZREVRANGE WITHSCORES, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZCOUNT,
-- ZRANDMEMBER WITHSCORES. KEYS and ARGV as lib/conveyor.lua says. Scores
-- in replies are positions; score arguments are positions, turned into
-- stored-score bounds that select exactly the members whose positions
-- they select. Anything Redis refuses goes to Redis as it is, for its own
-- error.

--#include lib/err.lua
--#include lib/float.lua
--#include lib/order.lua
--#include lib/conveyor.lua
--#include lib/conveyor_range.lua

local key = KEYS[1]
if not conveyor_zset(key) then
  return conveyor_as_is()
end
local offset = conveyor_offset(1)
if offset == nil then
  return conveyor_bad_offset(1)
end

-- ZRANGE and its older forms: where the score range's ends are (argument
-- indexes, min first), whether scores are wanted, whether it is by score;
-- nil when the options are not Redis's (it refuses them itself).
local function range_form()
  local byscore, rev, withscores = false, false, false
  local first_option, fixed_by, fixed_rev = 4, false, false
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
    if option == 'withscores' then
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
  local min_at, max_at = 2, 3
  if byscore and rev then
    min_at, max_at = 3, 2
  end
  return byscore, withscores, min_at, max_at
end

-- The command's arguments with the score range's ends translated (nil
-- when one is no number: Redis's error then).
local function translated_range(min_at, max_at)
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

local name = conveyor_name
if name == 'zscore' then
  if conveyor_argc ~= 3 then
    return conveyor_as_is()
  end
  local score = redis.call('ZSCORE', key, carg(2))
  return score and conveyor_score(tonumber(score) + offset)
elseif name == 'zmscore' then
  local scores = redis.pcall(unpack(ARGV, 3))
  if scores.err then
    return scores
  end
  for i = 1, #scores do
    if scores[i] then
      scores[i] = conveyor_score(tonumber(scores[i]) + offset)
    end
  end
  return scores
elseif name == 'zrank' or name == 'zrevrank' then
  local r = conveyor_as_is()
  if type(r) ~= 'table' or r.err or #r ~= 2 then
    return r
  end
  return { r[1], conveyor_score(tonumber(r[2]) + offset) }
elseif name == 'zrandmember' then
  local r = conveyor_as_is()
  if type(r) ~= 'table' or r.err then
    return r
  end
  return conveyor_scored_reply(r, offset)
elseif name == 'zcount' then
  if conveyor_argc ~= 4 then
    return conveyor_as_is()
  end
  local args = translated_range(2, 3)
  if args == nil then
    return conveyor_as_is()
  end
  return redis.pcall(unpack(args))
elseif name == 'zrange' or name == 'zrevrange' or name == 'zrangebyscore' or name == 'zrevrangebyscore' then
  local byscore, withscores, min_at, max_at = range_form()
  if byscore == nil then
    return conveyor_as_is()
  end
  local args = { unpack(ARGV, 3) }
  if byscore then
    args = translated_range(min_at, max_at)
    if args == nil then
      return conveyor_as_is()
    end
  end
  local r = redis.pcall(unpack(args))
  if r.err or not withscores then
    return r
  end
  return conveyor_scored_reply(r, offset)
end
return err("ERR verbproxy: '" .. name .. "' is not a read of a conveyor key")
