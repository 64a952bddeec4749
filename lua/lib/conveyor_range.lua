-- lib/conveyor_range.lua: score ranges and scored replies on conveyor
-- keys. Needs lib/conveyor.lua (and what it needs) before it.

-- The gap between a double and the next one up, for |x| >= 2^-1021.
local function conveyor_ulp(x)
  local _, e = math.frexp(x)
  return math.ldexp(1, e - 53)
end

-- The stored-score bound that selects exactly the members of `key` whose
-- position (stored + offset) is >= position (> if exclusive) when
-- `lower`, else <= (<) position, as a ZRANGE ... BYSCORE argument.
-- Positions keep the order of stored scores (rounding is monotonic), so
-- those members are all the stored scores from (or up to) one value on;
-- position - offset finds it but for rounding, so the few distinct stored
-- scores within some ulps of it are checked one by one (one ZRANGE ...
-- LIMIT 0 1 each, usually just one).
local function conveyor_bound(key, position, exclusive, lower, offset)
  if position == math.huge or position == -math.huge or offset == 0 then
    return (exclusive and '(' or '') .. format_score(position)
  end
  local guess = position - offset
  local margin = 4 * conveyor_ulp(math.max(math.abs(position), math.abs(offset), math.abs(guess)))
  local function inside(stored)
    local p = stored + offset
    if lower then
      return p > position or (not exclusive and p == position)
    end
    return p < position or (not exclusive and p == position)
  end
  local from, to, rev = format_score(guess - margin), '+inf', nil
  if not lower then
    from, to, rev = format_score(guess + margin), '-inf', 'REV'
  end
  while true do
    local r
    if rev then
      r = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
    else
      r = redis.call('ZRANGE', key, from, to, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    end
    if #r == 0 then
      return from -- no member there: any bound beyond them all
    end
    if inside(tonumber(r[2])) then
      return r[2]
    end
    from = '(' .. r[2]
  end
end

-- A score range's end ("(1.5", "-inf", "3") as Redis's zslParseRange
-- reads it: '(' for exclusive, then what strtod takes whole (leading
-- spaces, hex, inf, overflow to inf, "" as 0), never NaN. The value and
-- whether it excludes, or nil when Redis would refuse it. (Lua's tonumber
-- is that strtod, but for "" and trailing spaces.)
local function conveyor_parse_bound(text)
  local exclusive = string.sub(text, 1, 1) == '('
  if exclusive then
    text = string.sub(text, 2)
  end
  if text == '' then
    return 0, exclusive
  end
  if string.find(text, '%s$') then
    return nil
  end
  local value = tonumber(text)
  if value == nil or value ~= value then
    return nil
  end
  return value, exclusive
end

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
