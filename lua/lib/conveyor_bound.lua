-- lib/conveyor_bound.lua: score ranges on conveyor keys: a range's end in
-- positions as the stored-score bound that selects the same members.
-- Needs lib/conveyor.lua (and what it needs) before it.

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
-- LIMIT 0 1 each, usually just one). A second value, true, when the
-- bound was found past every member: the range holds none.
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
      return from, true -- no member there: any bound beyond them all
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
